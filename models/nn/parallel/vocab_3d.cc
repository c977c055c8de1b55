// 3D embeddings and LM head (see vocab_3d.h).
#include "models/nn/parallel/vocab_3d.h"

#include <vector>

#include "autograd/ops.h"
#include "models/nn/parallel/linear_3d.h"
#include "models/nn/parallel/shard_init.h"
#include "parallel/tensor/matmul_3d.h"
#include "parallel/tensor/placement_3d.h"
#include "parallel/tensor/region_ops.h"
#include "parallel/tensor/vocab_cross_entropy_3d.h"

namespace tessera::nn {
namespace {

using parallel::tensor::Cube3D;
using parallel::tensor::CubeCoords;
using parallel::tensor::Placement;

void check_batch(const std::string& who, const Tensor& ids, const Cube3D& cube) {
  TS_CHECK(ids.defined() && ids.dim() >= 2 && ids.size(0) % cube.q() == 0, who,
           "expected token ids (B, ...) with the batch B divisible by the 3D cube side q = ",
           cube.q(), ", got ", ids.defined() ? ids.describe() : "undefined");
}

// Rows [i b, (i + 1) b) of x (B, ...), b = B / q: batch chunk i (differentiable).
Tensor batch_chunk(const Tensor& x, const CubeCoords& at) {
  const int64_t b = x.size(0) / at.q;
  return narrow(x, 0, int64_t(at.i) * b, b);
}

// The ids' rows in this rank's table pieces, and which of them it holds. The table's rows are
// chunks c of r = V / q^2; a rank holds the chunks c = k' q + j, in order of k'. Checked on the
// host before any collective (the ids are the same on every rank, so every rank throws alike).
struct LocalRows {
  Tensor index;  // (...) i64: the local row, 0 where not held
  Tensor held;   // (...) of the table's dtype: 1 where held, else 0
};
LocalRows local_rows(const Tensor& ids, int64_t vocab, const CubeCoords& at, DType dtype,
                     const std::string& who) {
  const Tensor host = ids.to(kCPU).to(DType::i64).contiguous();
  const int64_t n = host.numel(), r = vocab / (int64_t(at.q) * at.q);
  const int64_t* id = host.data<int64_t>();
  std::vector<int64_t> index(size_t(n), 0);
  std::vector<float> held(size_t(n), 0.0f);
  for (int64_t e = 0; e < n; ++e) {
    TS_CHECK(id[e] >= 0 && id[e] < vocab, who, "expected ids in [0, ", vocab, "), got ", id[e],
             " at flat index ", e);
    const int64_t chunk = id[e] / r;
    if (chunk % at.q != at.j) continue;
    index[size_t(e)] = chunk / at.q * r + id[e] % r;
    held[size_t(e)] = 1.0f;
  }
  return {.index = from_vector(index, ids.shape(), ids.device()),
          .held = from_vector(held, ids.shape(), ids.device()).to(dtype)};
}

// The sum over `group` whose gradient is summed over it too (every rank uses the sum differently).
Tensor sum_over(const Tensor& x, const parallel::tensor::CommPtr& group) {
  return parallel::tensor::reduce_from_region(parallel::tensor::copy_to_region(x, group), group);
}

Placement table_placement(int64_t vocab, int64_t dim, const CubeCoords& at, const char* op) {
  (void)parallel::tensor::vocab_shard_3d(vocab, at, op);  // V divisible by q^2, named
  return parallel::tensor::weight_placement_3d({vocab, dim}, at, op);
}

// The columns of a (V, C) table cut as a 3D vector (placement_3d.h): (V, C / q^3).
Placement columns_placement_3d(int64_t rows, int64_t dim, const CubeCoords& at, const char* op) {
  const int q = at.q;
  TS_CHECK(dim % (int64_t(q) * q * q) == 0, op, "expected dim ", dim,
           " divisible by q^3 = ", q * q * q, " (the 3D cube side q = ", q, ")");
  Placement p = parallel::tensor::split({rows, dim}, 1, q, at.k, "3d_output");
  p.splits.push_back({.dim = 1, .parts = q, .index = at.j, .group = "3d_input"});
  p.splits.push_back({.dim = 1, .parts = q, .index = at.i, .group = "3d_weight"});
  return p;
}

}  // namespace

// ---------------------------------------------------------------- VocabParallelEmbedding3D

VocabParallelEmbedding3D::VocabParallelEmbedding3D(const EmbeddingSpec& spec,
                                                   const BuildContext& ctx, ParallelStyle style)
    : Embedding(spec, style, nullptr), cube_(ctx.cube("VocabParallelEmbedding3D")) {
  const Placement p =
      table_placement(spec.num_embeddings, spec.dim, cube_.coords(), "VocabParallelEmbedding3D");
  adopt(normal_shard(p, 0.0, spec.init_std, ctx.generator()), p);
}

Tensor VocabParallelEmbedding3D::partial_rows(const Tensor& ids) {
  const LocalRows rows =
      local_rows(ids, spec().num_embeddings, cube_.coords(), weight().dtype(), type_name());
  return mul(embedding(weight(), rows.index), unsqueeze(rows.held, -1));
}

Tensor VocabParallelEmbedding3D::feature_block(const Tensor& ids) {
  // Columns chunk k q + i of every row: the input group holds every row of them.
  const Tensor columns = sum_over(partial_rows(ids), cube_.input);
  // The weight group holds the columns k q + i' of every i': block k, in order.
  return parallel::tensor::all_gather_to_region(columns, -1, cube_.weight);  // (..., C / q)
}

Tensor VocabParallelEmbedding3D::forward(const Tensor& ids) {
  check_batch(type_name(), ids, cube_);  // before any collective, on every rank alike
  // Weight-group rank i' gets batch chunk i' of each member's columns k q + i: block k (C / q) of
  // its batch chunk, partial (only the rows chunks k' q + j of input-group rank j summed in).
  const Tensor block = parallel::tensor::all_to_all_to_region(partial_rows(ids), 0, -1,
                                                              cube_.weight);  // (B / q, ..., C / q)
  // Summed over the input group (whose ranks hold every row), chunk j of the block to rank j.
  return parallel::tensor::reduce_scatter_to_region(block, -1, cube_.input);  // (.., C / q^2)
}

Tensor VocabParallelEmbedding3D::row(int64_t id) {
  check_id(id);
  const CubeCoords at = cube_.coords();
  const int64_t local = spec().dim / (int64_t(at.q) * at.q);
  const Tensor ids = from_vector<int64_t>({id}, {1}, weight().device());
  return narrow(select(feature_block(ids), 0, 0), -1, int64_t(at.j) * local, local);
}

// ---------------------------------------------------------------- VocabParallelLMHead3D

LMHeadSpec VocabParallelLMHead3D::checked(const LMHeadSpec& spec) {
  shard_ =
      parallel::tensor::vocab_shard_3d(spec.vocab_size, cube_.coords(), "VocabParallelLMHead3D");
  return spec;
}

VocabParallelLMHead3D::VocabParallelLMHead3D(const LMHeadSpec& spec, const BuildContext& ctx,
                                             ParallelStyle style)
    : LMHead(spec, style, /*tied=*/false, nullptr), cube_(ctx.cube("VocabParallelLMHead3D")) {
  checked(spec);
  const CubeCoords at = cube_.coords();
  const Placement p = table_placement(spec.vocab_size, spec.d_model, at, "VocabParallelLMHead3D");
  Tensor w = normal_shard(p, 0.0, spec.init_std, ctx.generator());
  const Placement bp = spec.bias ? parallel::tensor::vector_placement_3d(
                                       spec.vocab_size, at, "VocabParallelLMHead3D bias")
                                 : Placement{};
  adopt(w, p, spec.bias ? zeros_shard(bp) : Tensor(), bp);
  plane_ = parallel::tensor::plane_group_3d(ctx.tensor_group(), cube_);
}

VocabParallelLMHead3D::VocabParallelLMHead3D(const LMHeadSpec& spec,
                                             const VocabParallelEmbedding3D& embedding,
                                             const BuildContext& ctx, ParallelStyle style)
    : LMHead(spec, style, /*tied=*/true, nullptr), cube_(ctx.cube("VocabParallelLMHead3D")) {
  check_tied_to(embedding.spec());
  checked(spec);
  const Placement bp = spec.bias
                           ? parallel::tensor::vector_placement_3d(spec.vocab_size, cube_.coords(),
                                                                   "VocabParallelLMHead3D bias")
                           : Placement{};
  adopt(embedding.weight(), Placement(), spec.bias ? zeros_shard(bp) : Tensor(), bp);
  plane_ = parallel::tensor::plane_group_3d(ctx.tensor_group(), cube_);
}

Tensor VocabParallelLMHead3D::local_logits(const Tensor& x) {
  const int64_t local = weight().size(1);
  TS_CHECK(x.defined() && x.dim() >= 2 && x.size(-1) == local, type_name(),
           "expected this rank's 3D piece (B / q, ..., ", local, ") of an input with ",
           spec().d_model, " features, got ", x.defined() ? x.describe() : "undefined");
  Tensor y = parallel::tensor::linear_3d(x, weight(), cube_);  // (B / q, ..., V / q^2)
  return bias().defined() ? add(y, parallel::tensor::gather_vector_3d(bias(), cube_)) : y;
}

Tensor VocabParallelLMHead3D::forward(const Tensor& x) {
  return parallel::tensor::gather_3d(local_logits(x), cube_);  // (B, ..., V)
}

Tensor VocabParallelLMHead3D::loss(const Tensor& x, const Tensor& targets,
                                   const CrossEntropyOptions& opts) {
  TS_CHECK(targets.defined() && x.defined() && targets.dim() >= 1 &&
               targets.size(0) == x.size(0) * cube_.q(),
           type_name(), "expected the whole batch's targets (",
           x.defined() ? x.size(0) * cube_.q() : 0, ", ...) for this rank's piece ",
           x.defined() ? x.describe() : "undefined", ", got ",
           targets.defined() ? targets.describe() : "undefined");
  return parallel::tensor::vocab_parallel_cross_entropy_3d(local_logits(x), targets, shard_, opts,
                                                           cube_, plane_);
}

// ---------------------------------------------------------------- Embedding3D

Embedding3D::Embedding3D(const EmbeddingSpec& spec, const BuildContext& ctx, ParallelStyle style)
    : Embedding(spec, style, nullptr), cube_(ctx.cube("Embedding3D")) {
  const Placement p =
      columns_placement_3d(spec.num_embeddings, spec.dim, cube_.coords(), "Embedding3D");
  adopt(normal_shard(p, 0.0, spec.init_std, ctx.generator()), p);
}

Tensor Embedding3D::forward(const Tensor& ids) {
  TS_CHECK(ids.defined() && ids.dim() >= 1, type_name(),
           "expected ids (B, ...) or positions (T), got ",
           ids.defined() ? ids.describe() : "undefined");
  if (ids.dim() == 1) return gathered_rows(ids);
  check_batch(type_name(), ids, cube_);
  const Tensor table = parallel::tensor::all_gather_to_region(weight(), 1, cube_.weight);
  return embedding(table, batch_chunk(ids, cube_.coords()));
}

Tensor Embedding3D::row(int64_t id) {
  check_id(id);
  return select(gathered_rows(from_vector<int64_t>({id}, {1}, weight().device())), 0, 0);
}

// The rows are looked up before the gather, so it moves T rows, not the table's L, and backward
// scatters the gradient into those rows alone (the others get zeros, as serial).
Tensor Embedding3D::gathered_rows(const Tensor& ids) {
  return parallel::tensor::all_gather_to_region(embedding(weight(), ids), -1, cube_.weight);
}

}  // namespace tessera::nn

// 2D embeddings and LM head (see vocab_2d.h).
#include "models/nn/parallel/vocab_2d.h"

#include "autograd/node.h"
#include "autograd/ops.h"
#include "models/nn/parallel/placement_2d.h"
#include "models/nn/parallel/shard_init.h"
#include "models/nn/parallel/vocab_1d.h"
#include "parallel/tensor/region_ops.h"
#include "parallel/tensor/vocab_cross_entropy_2d.h"

namespace tessera::nn {
namespace {

using parallel::tensor::Placement;
using parallel::tensor::SummaGrid;
using parallel::tensor::VocabShard;

// The vocabulary padded to a multiple of q^2 (so the LM head's bias cuts as a 2D vector), slice
// `index` of q.
VocabShard vocab_shard_2d(int64_t vocab_size, int index, const SummaGrid& grid) {
  return parallel::tensor::vocab_shard(vocab_size, index, grid.q(), grid.q());
}

// The (V, C) table viewed as (V_pad, C), cut in blocks: rows chunk r over the column group
// (2d_col), columns chunk s over the row group (2d_row); the same on every depth layer (2.5D).
Placement table_placement(int64_t vocab_size, int64_t dim, const SummaGrid& grid, const char* op) {
  const int q = grid.q();
  TS_CHECK(dim % q == 0, op, "expected dim ", dim, " divisible by the 2D grid side q = ", q);
  const VocabShard s = vocab_shard_2d(vocab_size, grid.grid_row(), grid);
  Placement p = parallel::tensor::split({vocab_size, dim}, 0, q, grid.grid_row(), grid.col->name(),
                                        {s.padded_vocab_size, dim});
  p.splits.push_back({.dim = 1, .parts = q, .index = grid.grid_col(), .group = grid.row->name()});
  return over_depth(std::move(p), grid);
}

// The bias (V) viewed as (V_pad), cut as a 2D vector: slice s over the row group, then piece r
// over the column group; the same on every depth layer (2.5D).
Placement bias_placement(int64_t vocab_size, const SummaGrid& grid) {
  const int q = grid.q();
  const VocabShard s = vocab_shard_2d(vocab_size, grid.grid_col(), grid);
  Placement p = parallel::tensor::split({vocab_size}, 0, q, grid.grid_col(), grid.row->name(),
                                        {s.padded_vocab_size});
  p.splits.push_back({.dim = 0, .parts = q, .index = grid.grid_row(), .group = grid.col->name()});
  return over_depth(std::move(p), grid);
}

void check_batch(const char* who, const Tensor& ids, const SummaGrid& grid) {
  TS_CHECK(ids.defined() && ids.dim() >= 2 && ids.size(0) % grid.batch_parts() == 0, who,
           "expected token ids (B, ...) with the batch B divisible by ",
           parallel::tensor::batch_split_text(grid), ", got ",
           ids.defined() ? ids.describe() : "undefined");
}

// Rows [i b, (i + 1) b) of ids (B, ...), b = B / parts: chunk i of `parts`.
Tensor rows_chunk(const Tensor& ids, int parts, int i) {
  const int64_t b = ids.size(0) / parts;
  return ids.narrow(0, int64_t(i) * b, b);
}

}  // namespace

// ---------------------------------------------------------------- SharedDepthReplica

Tensor SharedDepthReplica::of(const Tensor& table) {
  const bool needs_history = grid_.depth() > 1 && autograd::any_requires_grad({&table});
  const bool current = replica_.defined() && table_.is_same(table) &&
                       replica_.storage() == table.storage() &&
                       (replica_.grad_fn() != nullptr) == needs_history;
  if (!current) {
    table_ = table;
    replica_ = parallel::tensor::depth_replica(table, grid_);
  }
  return replica_;
}

// ---------------------------------------------------------------- VocabParallelEmbedding2D

VocabParallelEmbedding2D::VocabParallelEmbedding2D(const EmbeddingSpec& spec,
                                                   const BuildContext& ctx, ParallelStyle style)
    : Embedding(spec, style, nullptr),
      grid_(ctx.summa_grid()),
      table_(std::make_shared<SharedDepthReplica>(grid_)) {
  shard_ = vocab_shard_2d(spec.num_embeddings, grid_.grid_row(), grid_);
  const Placement p =
      table_placement(spec.num_embeddings, spec.dim, grid_, "VocabParallelEmbedding2D");
  adopt(normal_shard(p, 0.0, spec.init_std, ctx.generator()), p);
}

Tensor VocabParallelEmbedding2D::lookup(const Tensor& ids) {
  return masked_lookup(table_->of(weight()), ids, shard_);
}

Tensor VocabParallelEmbedding2D::forward(const Tensor& ids) {
  check_batch(type_name().c_str(), ids, grid_);  // before any collective, on every rank alike
  // 2.5D: this depth layer's slice of the batch (B / d), which its grid splits as 2D does.
  const Tensor layer_ids = rows_chunk(ids, grid_.depth(), grid_.depth_index());
  // (B / d, ..., C / q) partial rows: the sum over the grid column, this rank's batch chunk of it.
  return parallel::tensor::reduce_scatter_to_region(lookup(layer_ids), 0, grid_.col);
}

Tensor VocabParallelEmbedding2D::row(int64_t id) {
  check_id(id);
  const Tensor ids = from_vector<int64_t>({id}, {1}, weight().device());
  const Tensor partial = select(lookup(ids), 0, 0);  // (C / q), the owner's row or zeros
  // Summed over the grid column forward, and backward too (each rank adds it to its batch chunk).
  return parallel::tensor::reduce_from_region(parallel::tensor::copy_to_region(partial, grid_.col),
                                              grid_.col);
}

// ---------------------------------------------------------------- VocabParallelLMHead2D

VocabParallelLMHead2D::VocabParallelLMHead2D(const LMHeadSpec& spec, const BuildContext& ctx,
                                             ParallelStyle style)
    : LMHead(spec, style, /*tied=*/false, nullptr),
      grid_(ctx.summa_grid()),
      table_(std::make_shared<SharedDepthReplica>(grid_)) {
  shard_ = vocab_shard_2d(spec.vocab_size, grid_.grid_col(), grid_);
  const Placement p =
      table_placement(spec.vocab_size, spec.d_model, grid_, "VocabParallelLMHead2D");
  Tensor w = normal_shard(p, 0.0, spec.init_std, ctx.generator());
  const Placement bp = bias_placement(spec.vocab_size, grid_);
  adopt(w, p, spec.bias ? zeros_shard(bp) : Tensor(), bp);
}

VocabParallelLMHead2D::VocabParallelLMHead2D(const LMHeadSpec& spec,
                                             const VocabParallelEmbedding2D& embedding,
                                             const BuildContext& ctx, ParallelStyle style)
    : LMHead(spec, style, /*tied=*/true, nullptr),
      grid_(ctx.summa_grid()),
      table_(embedding.table_replica()) {
  check_tied_to(embedding.spec());
  shard_ = vocab_shard_2d(spec.vocab_size, grid_.grid_col(), grid_);
  const Placement bp = bias_placement(spec.vocab_size, grid_);
  adopt(embedding.weight(), Placement(), spec.bias ? zeros_shard(bp) : Tensor(), bp);
}

Tensor VocabParallelLMHead2D::local_logits(const Tensor& x) {
  const int64_t local = spec().d_model / grid_.q();
  TS_CHECK(x.defined() && x.dim() >= 2 && x.size(-1) == local, type_name(),
           "expected this rank's 2D block (B / q, ..., ", local, ") of an input with ",
           spec().d_model, " features, got ", x.defined() ? x.describe() : "undefined");
  // 2.5D: summed over depth, once with a tied embedding's lookup (SharedDepthReplica).
  Tensor y = parallel::tensor::summa_abt(x, table_->of(weight()), grid_);  // (B / q, .., V_pad / q)
  return bias().defined() ? add(y, gather_vector_2d(bias(), grid_)) : y;
}

Tensor VocabParallelLMHead2D::forward(const Tensor& x) {
  Tensor all = parallel::tensor::gather_2d(local_logits(x), grid_);  // (B, ..., V_pad)
  return narrow(all, -1, 0, spec().vocab_size);
}

Tensor VocabParallelLMHead2D::loss(const Tensor& x, const Tensor& targets,
                                   const CrossEntropyOptions& opts) {
  TS_CHECK(targets.defined() && x.defined() && targets.dim() >= 1 &&
               targets.size(0) == x.size(0) * grid_.batch_parts(),
           type_name(), "expected the whole batch's targets (",
           x.defined() ? x.size(0) * grid_.batch_parts() : 0, ", ...) for this rank's block ",
           x.defined() ? x.describe() : "undefined", ", got ",
           targets.defined() ? targets.describe() : "undefined");
  return parallel::tensor::vocab_parallel_cross_entropy_2d(local_logits(x), targets, shard_, opts,
                                                           grid_);
}

// ---------------------------------------------------------------- Embedding2D

Embedding2D::Embedding2D(const EmbeddingSpec& spec, const BuildContext& ctx, ParallelStyle style)
    : Embedding(spec, style, nullptr), grid_(ctx.summa_grid()) {
  const Placement p = columns_placement_2d({spec.num_embeddings, spec.dim}, grid_, "Embedding2D");
  adopt(normal_shard(p, 0.0, spec.init_std, ctx.generator()), p);
}

Tensor Embedding2D::forward(const Tensor& ids) {
  TS_CHECK(ids.defined() && ids.dim() >= 1, type_name(),
           "expected ids (B, ...) or positions (T), got ",
           ids.defined() ? ids.describe() : "undefined");
  if (ids.dim() == 1) return gathered_rows(ids);
  check_batch(type_name().c_str(), ids, grid_);
  const Tensor table = gather_columns_2d(weight(), grid_);  // (V, C / q)
  return embedding(table, rows_chunk(ids, grid_.batch_parts(), grid_.batch_index()));
}

Tensor Embedding2D::row(int64_t id) {
  check_id(id);
  return select(gathered_rows(from_vector<int64_t>({id}, {1}, weight().device())), 0, 0);
}

// The rows are looked up before the gather (and, under 2.5D, the depth sum), so both move T rows,
// not the table's L, and backward scatters the gradient into those rows alone (the others get
// zeros, as serial). The depth sum of the rows is the table's: every layer looks up the same ids.
Tensor Embedding2D::gathered_rows(const Tensor& ids) {
  return gather_columns_2d(embedding(weight(), ids), grid_);
}

}  // namespace tessera::nn

// Vocab-parallel embedding and LM head (see vocab_1d.h).
#include "models/nn/parallel/vocab_1d.h"

#include "autograd/ops.h"
#include "models/nn/parallel/sequence_1d.h"
#include "models/nn/parallel/shard_init.h"
#include "parallel/tensor/gathered_linear.h"
#include "parallel/tensor/region_ops.h"

namespace tessera::nn {
namespace {

using parallel::tensor::Placement;
using parallel::tensor::VocabShard;

// The (V, C) table viewed as (V_pad, C), split along its rows.
Placement table_placement(const VocabShard& s, int64_t dim, const BuildContext& ctx) {
  return parallel::tensor::split({s.vocab_size, dim}, 0, ctx.tensor_size(), ctx.tensor_rank(),
                                 "tensor", {s.padded_vocab_size, dim});
}

// The bias (V) viewed as (V_pad), split like the table's rows; undefined without one.
Tensor bias_shard(const LMHeadSpec& spec, const VocabShard& s, const BuildContext& ctx,
                  Placement& placement) {
  placement = parallel::tensor::split({s.vocab_size}, 0, ctx.tensor_size(), ctx.tensor_rank(),
                                      "tensor", {s.padded_vocab_size});
  return spec.bias ? zeros_shard(placement) : Tensor();
}

// A scalar of `like`'s dtype and device, for comparisons against ids.
Tensor scalar_like(const Tensor& like, double value) {
  return scalar_tensor(value, {.dtype = like.dtype(), .device = like.device()});
}

}  // namespace

Tensor masked_lookup(const Tensor& table, const Tensor& ids, const VocabShard& shard) {
  Tensor local = sub(ids, scalar_like(ids, double(shard.start)));
  Tensor mine = logical_and(ge(local, scalar_like(ids, 0.0)),
                            lt(local, scalar_like(ids, double(shard.valid()))));  // (...)
  Tensor rows = embedding(table, where(mine, local, zeros_like(local)));          // (..., C)
  return mul(rows, unsqueeze(to_dtype(mine, rows.dtype()), -1));
}

VocabShard vocab_shard_of(int64_t vocab_size, const BuildContext& ctx) {
  return parallel::tensor::vocab_shard(vocab_size, ctx.tensor_rank(), ctx.tensor_size());
}

VocabParallelEmbedding::VocabParallelEmbedding(const EmbeddingSpec& spec, const BuildContext& ctx)
    : Embedding(spec, ParallelStyle::vocab, nullptr),
      shard_(vocab_shard_of(spec.num_embeddings, ctx)),
      group_(ctx.tensor_group()),
      sequence_parallel_(ctx.sequence_parallel()) {
  const Placement p = table_placement(shard_, spec.dim, ctx);
  adopt(normal_shard(p, 0.0, spec.init_std, ctx.generator()), p);
}

Tensor VocabParallelEmbedding::lookup(const Tensor& ids) {
  // Ids outside this rank's rows look up row 0 and are zeroed; the all-reduce then gives every
  // rank the row of the rank that holds it.
  return masked_lookup(weight(), ids, shard_);
}

Tensor VocabParallelEmbedding::row(int64_t id) {
  check_id(id);
  const Tensor ids = from_vector<int64_t>({id}, {1}, weight().device());
  return parallel::tensor::reduce_from_region(select(lookup(ids), 0, 0), group_);
}

Tensor VocabParallelEmbedding::forward(const Tensor& ids) {
  Tensor rows = lookup(ids);  // (..., C)
  if (!sequence_parallel_) return parallel::tensor::reduce_from_region(rows, group_);
  TS_CHECK(ids.dim() == 2, type_name(), "expected ids (B, T) under sequence parallelism, got ",
           ids.describe());
  // The sum's rows [r T/P, (r + 1) T/P) only: half the traffic of the all-reduce.
  return parallel::tensor::reduce_scatter_to_region(rows, kSequenceDim, group_);
}

VocabParallelLMHead::VocabParallelLMHead(const LMHeadSpec& spec, const BuildContext& ctx)
    : LMHead(spec, ParallelStyle::vocab, /*tied=*/false, nullptr),
      shard_(vocab_shard_of(spec.vocab_size, ctx)),
      group_(ctx.tensor_group()),
      sequence_parallel_(ctx.sequence_parallel()) {
  const Placement p = table_placement(shard_, spec.d_model, ctx);
  Tensor w = normal_shard(p, 0.0, spec.init_std, ctx.generator());
  Placement bp;
  Tensor b = bias_shard(spec, shard_, ctx, bp);
  adopt(w, p, b, bp);
}

VocabParallelLMHead::VocabParallelLMHead(const LMHeadSpec& spec,
                                         const VocabParallelEmbedding& embedding,
                                         const BuildContext& ctx)
    : LMHead(spec, ParallelStyle::vocab, /*tied=*/true, nullptr),
      shard_(embedding.shard()),
      group_(ctx.tensor_group()),
      sequence_parallel_(ctx.sequence_parallel()) {
  check_tied_to(embedding.spec());
  Placement bp;
  Tensor b = bias_shard(spec, shard_, ctx, bp);
  adopt(embedding.weight(), Placement(), b, bp);
}

Tensor VocabParallelLMHead::local_logits(const Tensor& x) {
  TS_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == spec().d_model, type_name(),
           "expected input (..., ", spec().d_model, "), got ",
           x.defined() ? x.describe() : "undefined");
  if (!sequence_parallel_)
    return linear(parallel::tensor::copy_to_region(x, group_), weight(), bias());
  TS_CHECK(x.dim() == 3, type_name(), "expected a sequence shard (B, T/P, ", spec().d_model,
           ") under sequence parallelism, got ", x.describe());
  // Over the gathered (B, T, C), keeping only the shard for backward; the input gradient is
  // reduce-scattered, summing the ranks' vocabulary slices as copy_to_region's all-reduce would,
  // but only for this rank's rows.
  return parallel::tensor::gathered_linear(x, weight(), bias(), kSequenceDim, group_);
}

Tensor VocabParallelLMHead::forward(const Tensor& x) {
  Tensor all = parallel::tensor::gather_from_region(local_logits(x), -1, group_);  // (..., V_pad)
  return narrow(all, -1, 0, shard_.vocab_size);
}

Tensor VocabParallelLMHead::loss(const Tensor& x, const Tensor& targets,
                                 const CrossEntropyOptions& opts) {
  return parallel::tensor::vocab_parallel_cross_entropy(local_logits(x), targets, shard_, opts,
                                                        group_);
}

}  // namespace tessera::nn

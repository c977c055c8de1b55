// The vocabulary split over the tensor group of P ranks (Megatron's): the table (V, C) padded to
// V_pad rows, a multiple of P, each rank holding V_pad / P contiguous rows (the padding rows are
// zeros and never used).
//   VocabParallelEmbedding  looks up the ids in its rows (others give zeros) and all-reduces.
//   VocabParallelLMHead     this rank's logits (..., V_pad / P) from its rows (tied: the
//                           embedding's shard itself); loss() is the vocab-parallel cross-entropy
//                           on them, never gathering the logits; forward() gathers the full
//                           (..., V) logits for generation and evaluation.
// Under sequence parallelism (sequence_1d.h) the embedding reduce-scatters along the sequence
// instead of all-reducing, giving this rank's shard (B, T/P, C), and the head all-gathers the
// sequence of its input shard (backward: reduce-scatter) before its logits. The loss is computed on
// the full sequence of each rank's vocabulary slice, as without sequence parallelism: the
// vocab-parallel cross-entropy needs every vocabulary slice of a position, and the gather of the
// (B, T, C) input is P times smaller than one of (B, T/P, V) logits would be. Every rank then holds
// the same loss.
#pragma once

#include <memory>

#include "models/nn/build_context.h"
#include "models/nn/embedding.h"
#include "models/nn/heads.h"
#include "parallel/tensor/vocab_cross_entropy.h"

namespace tessera::nn {

// This rank's slice of spec.num_embeddings padded for the context's tensor group.
parallel::tensor::VocabShard vocab_shard_of(int64_t vocab_size, const BuildContext& ctx);

// The rows of `table` (shard.local, C), the slice `shard` of a vocabulary, for the ids (...) it
// holds, and zeros for the others: (..., C). Summed over the slices' ranks it is the serial lookup.
Tensor masked_lookup(const Tensor& table, const Tensor& ids,
                     const parallel::tensor::VocabShard& shard);

class VocabParallelEmbedding final : public Embedding {
 public:
  VocabParallelEmbedding(const EmbeddingSpec& spec, const BuildContext& ctx);
  std::string type_name() const override { return "VocabParallelEmbedding"; }
  // ids (...) global i32/i64 -> (..., dim), replicated over the group; sequence parallel: ids
  // (B, T) -> this rank's shard (B, T/P, dim)
  Tensor forward(const Tensor& ids) override;
  // (dim), replicated over the group (the owner's row, all-reduced).
  Tensor row(int64_t id) override;
  const parallel::tensor::VocabShard& shard() const { return shard_; }

 private:
  // The rows of ids this rank holds, zeros for the others: (..., dim), summed over the group.
  Tensor lookup(const Tensor& ids);
  parallel::tensor::VocabShard shard_;
  std::shared_ptr<parallel::Communicator> group_;
  bool sequence_parallel_ = false;
};

class VocabParallelLMHead final : public LMHead {
 public:
  // Its own weight shard, drawn as the serial LMHead draws its weight.
  VocabParallelLMHead(const LMHeadSpec& spec, const BuildContext& ctx);
  // Tied to the embedding's shard.
  VocabParallelLMHead(const LMHeadSpec& spec, const VocabParallelEmbedding& embedding,
                      const BuildContext& ctx);
  std::string type_name() const override { return "VocabParallelLMHead"; }
  // (..., d_model) -> the full (..., vocab) logits (gathered over the group). Sequence parallel:
  // x is this rank's shard (B, T/P, d_model), the logits (B, T, vocab); loss() takes the full
  // (B, T) targets.
  Tensor forward(const Tensor& x) override;
  Tensor loss(const Tensor& x, const Tensor& targets, const CrossEntropyOptions& opts) override;
  // (..., d_model) -> this rank's (..., V_pad / P) logits (sequence parallel: of the gathered
  // (B, T)).
  Tensor local_logits(const Tensor& x);

 private:
  parallel::tensor::VocabShard shard_;
  std::shared_ptr<parallel::Communicator> group_;
  bool sequence_parallel_ = false;
};

}  // namespace tessera::nn

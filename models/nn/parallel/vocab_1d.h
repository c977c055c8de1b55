// The vocabulary split over the tensor group of P ranks (Megatron's): the table (V, C) padded to
// V_pad rows, a multiple of P, each rank holding V_pad / P contiguous rows (the padding rows are
// zeros and never used).
//   VocabParallelEmbedding  looks up the ids in its rows (others give zeros) and all-reduces.
//   VocabParallelLMHead     this rank's logits (..., V_pad / P) from its rows (tied: the
//                           embedding's shard itself); loss() is the vocab-parallel cross-entropy
//                           on them, never gathering the logits; forward() gathers the full
//                           (..., V) logits for generation and evaluation.
#pragma once

#include <memory>

#include "models/nn/build_context.h"
#include "models/nn/embedding.h"
#include "models/nn/heads.h"
#include "parallel/tensor/vocab_cross_entropy.h"

namespace tessera::nn {

// This rank's slice of spec.num_embeddings padded for the context's tensor group.
parallel::tensor::VocabShard vocab_shard_of(int64_t vocab_size, const BuildContext& ctx);

class VocabParallelEmbedding final : public Embedding {
 public:
  VocabParallelEmbedding(const EmbeddingSpec& spec, const BuildContext& ctx);
  std::string type_name() const override { return "VocabParallelEmbedding"; }
  // ids (...) global i32/i64 -> (..., dim), replicated over the group
  Tensor forward(const Tensor& ids) override;
  const parallel::tensor::VocabShard& shard() const { return shard_; }

 private:
  parallel::tensor::VocabShard shard_;
  std::shared_ptr<parallel::Communicator> group_;
};

class VocabParallelLMHead final : public LMHead {
 public:
  // Its own weight shard, drawn as the serial LMHead draws its weight.
  VocabParallelLMHead(const LMHeadSpec& spec, const BuildContext& ctx);
  // Tied to the embedding's shard.
  VocabParallelLMHead(const LMHeadSpec& spec, const VocabParallelEmbedding& embedding,
                      const BuildContext& ctx);
  std::string type_name() const override { return "VocabParallelLMHead"; }
  // (..., d_model) -> the full (..., vocab) logits (gathered over the group).
  Tensor forward(const Tensor& x) override;
  Tensor loss(const Tensor& x, const Tensor& targets, const CrossEntropyOptions& opts) override;
  // (..., d_model) -> this rank's (..., V_pad / P) logits.
  Tensor local_logits(const Tensor& x);

 private:
  parallel::tensor::VocabShard shard_;
  std::shared_ptr<parallel::Communicator> group_;
};

}  // namespace tessera::nn

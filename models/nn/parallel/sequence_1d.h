// Megatron's sequence parallelism over the 1D tensor group of P ranks
// (parallel.tensor.sequence_parallel): outside the tensor-parallel regions (attention's and the
// MLP's column -> row pairs, the vocab-parallel embedding and head) the activations are sequence
// shards (B, T/P, C), rank r holding rows [r T/P, (r + 1) T/P) of the serial (B, T, C). So the
// residual stream, LayerNorm and the residual dropouts keep 1/P of the activations. The layers
// change their region ops, not their maths:
//   ColumnParallelLinear    all-gathers the sequence instead of copy_to_region, fused with its
//                           linear (parallel/tensor/gathered_linear.h: only the shard is kept for
//                           backward, which gathers it again; the input gradient reduce-scatters).
//   RowParallelLinear       reduce-scatters along the sequence instead of all-reducing; its
//                           replicated bias then sees a shard and gets a partial gradient.
//   VocabParallelEmbedding  reduce-scatters along the sequence instead of all-reducing.
//   VocabParallelLMHead     all-gathers the sequence before its logits (fused, as the column
//                           linear): the vocab-parallel loss needs every position of its
//                           vocabulary slice.
//   LayerNorm, Dropout      on shards: LayerNorm's weight and bias gradients summed over the group
//                           in backward (LayerNormSpec::grad_group), Dropout drawing its chunk of
//                           the serial mask (DropoutChunk).
// Replicated parameters that see a shard (LayerNorm weights and biases, row-parallel biases) have
// their gradients summed in backward by copy_to_region, so after backward every rank holds the
// serial gradient and the trainer needs nothing more. Position embeddings are looked up whole and
// cut with scatter(): its backward all-gathers the chunks, giving the serial gradient too. Models
// whose heads need every position (BERT's masked-LM head and pooler, ViT's class-token head)
// gather() the shards after their last block and run the head replicated on the full sequence.
#pragma once

#include <cstdint>
#include <memory>

#include "core/tensor.h"
#include "models/nn/build_context.h"
#include "models/nn/dropout.h"
#include "parallel/comm/communicator.h"

namespace tessera::nn {

// The sequence dim of the (B, T, C) activations the shards split.
inline constexpr int64_t kSequenceDim = 1;

class SequenceSplit {
 public:
  SequenceSplit() = default;  // off: parts 1, every call the identity
  // On when ctx.sequence_parallel().
  explicit SequenceSplit(const BuildContext& ctx);

  bool on() const { return group_ != nullptr; }
  int parts() const { return parts_; }
  int index() const { return index_; }
  // The tensor group (null when off).
  const std::shared_ptr<parallel::Communicator>& group() const { return group_; }

  // Throws unless a sequence of length t splits into parts() shards, naming `who`.
  void check_length(const char* who, int64_t t) const;
  // This rank's chunk along `dim` of a tensor every rank holds whole (positions): backward
  // all-gathers the chunks' gradients, so every rank gets the whole serial gradient.
  Tensor scatter(const Tensor& x, int64_t dim) const;
  // The whole tensor from every rank's chunk along `dim` (rank order): backward takes this rank's
  // chunk of the gradient, which must be the same on every rank (the computation after the gather
  // is replicated over the group). The identity when off.
  Tensor gather(const Tensor& x, int64_t dim) const;
  // x itself, for a replicated tensor that every rank's shard uses (broadcast over the sequence):
  // backward sums its partial gradients over the group, giving the serial one. Identity when off.
  Tensor replicate(const Tensor& x) const;
  // Where this rank's (B, T/P, C) shard lies in the serial (B, T, C).
  DropoutChunk dropout_chunk() const {
    return {.dim = kSequenceDim, .parts = parts_, .index = index_};
  }

 private:
  std::shared_ptr<parallel::Communicator> group_;
  int parts_ = 1;
  int index_ = 0;
};

}  // namespace tessera::nn

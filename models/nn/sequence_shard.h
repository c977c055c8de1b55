// The paper's sequence parallelism (parallel.sequence > 1), as the models see it: the S ranks of
// the sequence group each hold T/S positions of the same sequences, in parallel.sequence.layout:
// contiguous (rank r: [r T/S, (r + 1) T/S)) or zigzag (rank r: chunks r and 2S - 1 - r of 2S,
// in that order, which balances causal attention). Token embeddings,
// LayerNorms, MLPs, dropout and the loss work on this rank's positions; attention crosses ranks
// (parallel/sequence/attention.h) and positions are looked up by their global index. Every
// parameter is replicated over the group: the trainer averages gradients over data x sequence.
#pragma once

#include <cstdint>
#include <memory>

#include "core/tensor.h"
#include "models/nn/build_context.h"
#include "models/nn/dropout.h"
#include "parallel/sequence/attention.h"
#include "parallel/sequence/layout.h"

namespace tessera::nn {

class SequenceShard {
 public:
  SequenceShard() = default;  // off: the whole sequence is local
  // On when ctx's parallel.sequence > 1.
  explicit SequenceShard(const BuildContext& ctx);

  bool on() const { return size_ > 1; }
  int size() const { return size_; }
  int rank() const { return rank_; }
  const std::shared_ptr<parallel::Communicator>& group() const { return group_; }

  parallel::sequence::SequenceLayout layout() const { return layout_; }
  // What a sequence length must be a multiple of: S (contiguous), 2S (zigzag); 1 when off.
  int64_t multiple() const;
  // Throws unless t positions split over the group in this layout, naming `who`.
  void check_length(const char* who, int64_t t) const;
  // This rank's positions of full (.., T, ..) along dim (ids, targets, masks: not differentiable
  // or differentiable alike). The identity when off.
  Tensor take(const Tensor& full, int64_t dim) const;
  // This rank's global positions (T/S) i64, in local order, on `device`.
  Tensor positions(int64_t t, Device device) const;
  // Every rank's local (.., T/S, ..) along dim, gathered into the serial order (.., T, ..) on every
  // rank. Not differentiable: evaluation and generation. The identity when off.
  Tensor gather(const Tensor& local, int64_t dim) const;
  // Where this rank's positions lie for dropout: its chunk along dim 1 (zigzag: two of 2S).
  DropoutChunk dropout_chunk() const;
  // The attention arguments' sequence part (mode, group, layout); undefined group when off.
  parallel::sequence::SequenceAttentionArgs attention_args() const;

  // The whole sequence's first token (B, C) (BERT's [CLS], ViT's class token) on every rank, from
  // this rank's shard local (B, T/S, C): rank 0 holds it and an all-reduce hands it to the
  // others. Its backward all-reduces too, so rank 0's row gets the gradient of every rank's loss
  // (each rank computes the heads that read the token). Off: select(local, 1, 0).
  Tensor first_token(const Tensor& local) const;
  // This rank's share of a mean over tokens that the ranks' shards hold unequal numbers of (BERT's
  // masked positions): local_sum, the sum of a per-token loss over this rank's local_count tokens,
  // times S / (the group's total count). The mean over the group's ranks, which the trainer takes,
  // is then the whole sequence's mean, and so are its gradients. Off: local_sum / local_count.
  Tensor mean_share(const Tensor& local_sum, int64_t local_count) const;

 private:
  int size_ = 1, rank_ = 0;
  parallel::sequence::SequenceAttentionMode mode_ =
      parallel::sequence::SequenceAttentionMode::ring_flash;
  parallel::sequence::SequenceLayout layout_ = parallel::sequence::SequenceLayout::contiguous;
  std::shared_ptr<parallel::Communicator> group_;
};

}  // namespace tessera::nn

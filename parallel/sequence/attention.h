// Sequence-parallel self-attention: q, k and v hold this rank's positions of a sequence split over
// the ranks of a sequence group (layout.h), and the result is this rank's positions of the serial
// scaled_dot_product_attention over the whole sequence, forward and backward, with the same
// causal and padding masks and the same dropout mask (drawn at global (query, key) positions).
// Three modes:
//   ring        the Colossal-AI paper's ring self-attention: K chunks pass around the ring to
//               build this rank's (B, H, T/S, T) scores, masks, softmax and dropout, then V
//               chunks pass around to form the output; the backward passes V with dV, then K
//               with dK. The (T/S, T) scores are materialised (the paper's method).
//   all_to_all  DeepSpeed-Ulysses: all-to-all from sequence shards (B, H, T/S, D) to head shards
//               (B, H/S, T, D), the fused attention over the whole sequence, and back. H must be
//               divisible by S.
//   ring_flash  ring attention over the fused kernels: each step attends the local queries to one
//               rank's K/V block (kernels::attention_forward) and merges (out, lse) by the
//               log-sum-exp rule while the next block is in flight; blocks above the causal
//               diagonal are skipped. The backward recomputes each block with the final out and lse
//               (kernels::attention_backward) and passes dK, dV back to their owners. No (T, T) or
//               (T/S, T) scores exist. Use the zigzag layout with a causal mask to balance the
//               work.
// Every rank of the group must call with the same arguments (shapes, mode, layout, masks, dropout,
// generator state) in the same order; the backward runs on every rank (its nodes always run).
// Bytes each mode moves per rank, per forward + backward, n = B * H * (T / S) * D elements of
// size e (q's dtype), gradient sums in f32:
//   ring, ring_flash  forward 2 (S - 1) n e; backward 2 (S - 1) n e + 2 S n 4 (sends; the same
//                     received)
//   all_to_all        8 all-to-alls of n e each (q, k, v, out; dout, dq, dk, dv): 8 (S - 1) / S n e
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/generator.h"
#include "core/tensor.h"
#include "parallel/comm/communicator.h"
#include "parallel/sequence/layout.h"
#include "parallel/sequence/modes.h"

namespace tessera::parallel::sequence {

using CommPtr = std::shared_ptr<Communicator>;


// What a forward computed on this rank (added to, never reset).
struct SequenceAttentionStats {
  int64_t blocks = 0;          // score blocks (ring_flash: kernel calls; ring: K chunks)
  int64_t score_elements = 0;  // (query, key) pairs scored, summed over batch and heads
};

struct SequenceAttentionArgs {
  SequenceAttentionMode mode = SequenceAttentionMode::ring_flash;
  CommPtr group{};  // the sequence group; null or a group of one: the whole sequence is local
  SequenceLayout layout = SequenceLayout::contiguous;  // which positions q, k, v hold
  bool causal = false;
  // (B, T) bool, true = attend: the WHOLE sequence's mask in serial order (not the layout's),
  // the same on every rank, on q's device; undefined for none. It is T bools per sequence, cheaper
  // to hold whole than to pass around with every K block.
  Tensor key_padding_mask{};
  double dropout_p = 0.0;
  std::optional<double> scale{};  // default 1/sqrt(D)
  Generator* gen = nullptr;       // default_generator() when null; advanced as the serial op does
  // Tensor parallelism, as in AttentionArgs: these H heads are [head_offset, head_offset + H) of
  // total_heads (0: H), so dropout draws the whole layer's mask.
  int64_t total_heads = 0;
  int64_t head_offset = 0;
  SequenceAttentionStats* stats = nullptr;  // when set, the forward adds what it computed
};

// q, k, v (B, H, T/S, D): this rank's positions (args.layout) -> (B, H, T/S, D), this rank's
// positions of the serial attention's output. Differentiable in q, k and v.
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v,
                 const SequenceAttentionArgs& args);

// The modes one by one (args.mode is ignored). ring_flash also returns this rank's rows of the
// serial log-sum-exp of the scaled, masked scores, (B, H, T/S) f32 (-inf for a row with no
// visible key), detached.
struct RingFlashOutput {
  Tensor out;
  Tensor lse;
};
Tensor ring_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                      const SequenceAttentionArgs& args);
Tensor all_to_all_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                            const SequenceAttentionArgs& args);
RingFlashOutput ring_flash_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                     const SequenceAttentionArgs& args);

}  // namespace tessera::parallel::sequence

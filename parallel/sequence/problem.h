// The validated geometry and options of one sequence-parallel attention call, shared by the modes
// (internal to parallel/sequence): sizes, this rank's segments, the kernel options of a
// (query segment, key segment) block with its dropout counters at global positions, and the key
// padding mask of a key segment.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/attention_dropout.h"
#include "kernels/kernels.h"
#include "parallel/sequence/attention.h"
#include "parallel/sequence/ring_plan.h"

namespace tessera::parallel::sequence::detail {

struct Problem {
  int64_t B = 0, H = 0, C = 0, T = 0, D = 0;  // C = T / size positions per rank
  Communicator* group = nullptr;              // null: a group of one
  int size = 1, rank = 0;
  SequenceLayout layout = SequenceLayout::contiguous;
  bool causal = false;
  float scale = 1.0f;
  Tensor mask;  // (B, T) bool, serial order, or undefined
  // Dropout on the (B, heads, T, T) probabilities of the whole layer; counters reserved by
  // reserve_dropout.
  float dropout_p = 0.0f;
  uint64_t seed = 0, offset = 0;
  int64_t heads = 0, head_offset = 0;
  SequenceAttentionStats* stats = nullptr;

  std::vector<Segment> segments() const { return rank_segments(layout, T, size, rank); }
  std::vector<AttentionBlock> blocks(int owner) const {
    return ring_blocks(layout, T, size, rank, owner, causal);
  }
  // The whole layer's dropout grid, (B, heads, T, T) from offset.
  kernels::AttentionDropoutGrid dropout_grid() const;
  // The kernels' options for `block`: its causal flag, the scale, and its dropout counters at the
  // block's global (query, key) positions.
  kernels::AttentionOptions block_options(const AttentionBlock& block) const;
  // The mask of the keys of `k` (B, k.length), a view; undefined without a mask.
  Tensor mask_of(const Segment& k) const;
};

// Checks q, k, v (B, H, C, D) of one floating dtype and device, the group's device type, the
// layout's split of C * size, the mask (B, C * size) and the dropout and scale; `op` names the
// caller in messages. Reserves nothing.
Problem make_problem(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                     const SequenceAttentionArgs& args);

// Reserves the serial layer's B * heads * T * T dropout counters from args.gen (or the default
// generator) when dropout_p > 0, as scaled_dot_product_attention does.
void reserve_dropout(Problem& p, const SequenceAttentionArgs& args);

}  // namespace tessera::parallel::sequence::detail

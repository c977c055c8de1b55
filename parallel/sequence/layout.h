// How a sequence of T positions is split over the S ranks of a sequence group, as pure arithmetic,
// and the differentiable permutations between the serial order and the ranks' layout.
//   contiguous  rank r holds positions [r T/S, (r + 1) T/S).
//   zigzag      the sequence is cut into 2S chunks of T/(2S) and rank r holds chunks r and
//               2S - 1 - r, in that order: under a causal mask every rank then scores the same
//               number of (query, key) pairs (an early chunk has few keys, its partner many).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "parallel/sequence/modes.h"

namespace tessera::parallel::sequence {


// Consecutive positions a rank holds: global positions [global, global + length) are its local
// positions [local, local + length).
struct Segment {
  int64_t global = 0;
  int64_t local = 0;
  int64_t length = 0;
  int64_t global_end() const { return global + length; }
  bool operator==(const Segment&) const = default;
};

// Throws unless `total` positions split evenly over `size` ranks in `layout` (zigzag: into 2 size
// chunks); the message names op, the layout and both numbers.
void check_split(const char* op, SequenceLayout layout, int64_t total, int size);

// Positions per rank: total / size.
inline int64_t shard_length(int64_t total, int size) { return total / size; }

// The segments rank `rank` holds, in local order: one (contiguous) or two (zigzag).
std::vector<Segment> rank_segments(SequenceLayout layout, int64_t total, int size, int rank);

// order[i] = the global position at position i of the laid-out sequence, the ranks' shards
// concatenated in rank order (so rank r's shard is [r total / size, (r + 1) total / size)).
std::vector<int64_t> layout_order(SequenceLayout layout, int64_t total, int size);

// Differentiable. full (.., total, ..) along dim -> the laid-out sequence (every rank's shard,
// in rank order), and its inverse. Contiguous layouts return the input itself.
Tensor to_layout(const Tensor& full, int64_t dim, SequenceLayout layout, int size);
Tensor from_layout(const Tensor& laid_out, int64_t dim, SequenceLayout layout, int size);
// Rank `rank`'s shard of full along dim, contiguous (differentiable).
Tensor shard_sequence(const Tensor& full, int64_t dim, SequenceLayout layout, int size, int rank);

// The zigzag permutation and its inverse, by name.
inline Tensor zigzag_permute(const Tensor& full, int64_t dim, int size) {
  return to_layout(full, dim, SequenceLayout::zigzag, size);
}
inline Tensor zigzag_unpermute(const Tensor& laid_out, int64_t dim, int size) {
  return from_layout(laid_out, dim, SequenceLayout::zigzag, size);
}

}  // namespace tessera::parallel::sequence

// Sequence layouts: the segments of each rank, and the permutations built from narrow and cat (so
// autograd carries gradients through them).
#include "parallel/sequence/layout.h"

#include <algorithm>

#include "autograd/ops.h"
#include "core/error.h"

namespace tessera::parallel::sequence {
namespace {

// Every rank's segments with their place in the laid-out sequence: (global start, laid-out
// start, length), in laid-out order.
std::vector<Segment> laid_out_segments(SequenceLayout layout, int64_t total, int size) {
  std::vector<Segment> all;
  const int64_t shard = shard_length(total, size);
  for (int r = 0; r < size; ++r) {
    for (Segment s : rank_segments(layout, total, size, r)) {
      s.local += r * shard;
      all.push_back(s);
    }
  }
  return all;
}

// The pieces of x along d (each at its global or its laid-out start), joined in order; x itself
// when that is one piece.
Tensor join_pieces(const Tensor& x, int64_t d, const std::vector<Segment>& pieces, bool by_global) {
  if (pieces.size() == 1) return x;
  std::vector<Tensor> parts;
  for (const Segment& s : pieces)
    parts.push_back(narrow(x, d, by_global ? s.global : s.local, s.length));
  return cat(parts, d);
}

int64_t sequence_dim(const char* op, const Tensor& x, int64_t dim, SequenceLayout layout,
                     int size) {
  TS_CHECK(x.defined() && x.dim() > 0, op, "expected a defined tensor with a sequence dim, got ",
           x.defined() ? x.describe() : std::string("an undefined tensor"));
  TS_CHECK(size >= 1, op, "expected a group size of at least 1, got ", size);
  const int64_t d = wrap_dim(dim, x.dim(), op);
  check_split(op, layout, x.size(d), size);
  return d;
}

}  // namespace

void check_split(const char* op, SequenceLayout layout, int64_t total, int size) {
  const int64_t pieces = layout == SequenceLayout::zigzag ? 2 * int64_t(size) : int64_t(size);
  TS_CHECK(size >= 1 && total % pieces == 0, op, "expected a sequence of ", total,
           " positions to split into ", pieces,
           layout == SequenceLayout::zigzag ? " zigzag chunks (2 x " : " shards (", size,
           " ranks), got a remainder of ", size >= 1 ? total % pieces : total);
}

std::vector<Segment> rank_segments(SequenceLayout layout, int64_t total, int size, int rank) {
  TS_ASSERT(size >= 1 && rank >= 0 && rank < size);
  if (layout == SequenceLayout::contiguous) {
    const int64_t n = shard_length(total, size);
    return {Segment{rank * n, 0, n}};
  }
  const int64_t c = total / (2 * int64_t(size));
  return {Segment{rank * c, 0, c}, Segment{(2 * int64_t(size) - 1 - rank) * c, c, c}};
}

std::vector<int64_t> layout_order(SequenceLayout layout, int64_t total, int size) {
  std::vector<int64_t> order;
  order.reserve(size_t(total));
  for (const Segment& s : laid_out_segments(layout, total, size)) {
    for (int64_t i = 0; i < s.length; ++i) order.push_back(s.global + i);
  }
  return order;
}

Tensor to_layout(const Tensor& full, int64_t dim, SequenceLayout layout, int size) {
  const int64_t d = sequence_dim("to_layout", full, dim, layout, size);
  if (layout == SequenceLayout::contiguous) return full;
  return join_pieces(full, d, laid_out_segments(layout, full.size(d), size), /*by_global=*/true);
}

Tensor from_layout(const Tensor& laid_out, int64_t dim, SequenceLayout layout, int size) {
  const int64_t d = sequence_dim("from_layout", laid_out, dim, layout, size);
  if (layout == SequenceLayout::contiguous) return laid_out;
  std::vector<Segment> pieces = laid_out_segments(layout, laid_out.size(d), size);
  std::sort(pieces.begin(), pieces.end(),
            [](const Segment& a, const Segment& b) { return a.global < b.global; });
  return join_pieces(laid_out, d, pieces, /*by_global=*/false);
}

Tensor shard_sequence(const Tensor& full, int64_t dim, SequenceLayout layout, int size, int rank) {
  const int64_t d = sequence_dim("shard_sequence", full, dim, layout, size);
  TS_CHECK(rank >= 0 && rank < size, "shard_sequence", "expected a rank in [0, ", size, "), got ",
           rank);
  std::vector<Tensor> parts;
  for (const Segment& s : rank_segments(layout, full.size(d), size, rank)) {
    parts.push_back(narrow(full, d, s.global, s.length));
  }
  return parts.size() == 1 ? contiguous(parts[0]) : cat(parts, d);
}

}  // namespace tessera::parallel::sequence

// Pieces of a tensor in serial terms, and the index arithmetic that reshards them. A piece is a box
// (offsets + shape) in a *view* of the global tensor, optionally narrowed to a flat range of the
// box's elements (row-major). The view is the global tensor regrouped ((3C, C) as (3, C, C): same
// elements, same row-major order) or padded (vocab rows padded to a multiple: each dimension at
// least the global one; padding elements belong to no tensor and are never stored). This covers
// every tensor-parallel split (1d/2d/2.5d/3d cut boxes out of their view), ZeRO's flat shards on
// top of them, and pipeline stages (a stage holds a subset of the names).
//
// A piece's stored data is its elements that lie in the global tensor, in box order. piece_runs()
// lists them as contiguous runs of the *flat global* index space, so reading a piece under another
// layout is intersecting two lists of runs and copying (copy_runs).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/shape.h"

namespace tessera::io {

struct PieceBox {
  Shape global;                  // the serial tensor's shape
  Shape view;                    // the view the box lies in; empty: the global shape itself
  std::vector<int64_t> offsets;  // where the box starts in the view; empty: at the origin
  Shape shape;                   // the box's shape; empty (with empty offsets): the whole view
  // Flat range [begin, end) of the box's elements; end < 0: to the end of the box.
  int64_t begin = 0;
  int64_t end = -1;

  const Shape& view_shape() const { return view.empty() ? global : view; }
  Shape box_shape() const { return shape.empty() && offsets.empty() ? view_shape() : shape; }
  int64_t box_numel() const { return shape_numel(box_shape()); }
  int64_t range_end() const { return end < 0 ? box_numel() : end; }
  // Elements of the range, padding included: the size of the local tensor a rank keeps for it.
  int64_t range_numel() const { return range_end() - begin; }
  std::string describe() const;  // "box [0, 64) x [32, 64) of view (3, 64, 64), elements [0, 100)"
};

// A box of a whole tensor (no view, no range).
PieceBox whole(const Shape& global);

// A contiguous stretch: elements [global, global + length) of the flattened global tensor, which
// are elements [local, local + length) of the piece's range (counted from `begin`, padding
// included: the rank's local tensor) and [stored, stored + length) of its stored data.
struct Run {
  int64_t global = 0;
  int64_t local = 0;
  int64_t stored = 0;
  int64_t length = 0;
};

// Throws ValueError "[pieces] <what>: ..." unless the box is well formed: the view regroups the
// global tensor (same element count) or pads it (same rank, each dimension >= the global one), the
// box lies inside the view and the range inside the box.
void check_box(const PieceBox& box, const std::string& what);

// The piece's runs in stored order (which is increasing global order), adjacent ones merged.
// Validates the box first (check_box).
std::vector<Run> piece_runs(const PieceBox& box, const std::string& what = "piece");

// How many elements the piece stores (its range minus padding).
int64_t stored_numel(const std::vector<Run>& runs);

// Copies every element that a source piece stores and the target's range holds:
// dst[target.local...] = src[source.stored...] over the intersection of the two run lists (both
// sorted by global offset), elements of `itemsize` bytes. Returns the elements copied.
int64_t copy_runs(const void* src, const std::vector<Run>& source, void* dst,
                  const std::vector<Run>& target, size_t itemsize);

// The piece's elements gathered from its local tensor (range_numel() elements, padding included)
// into the stored order (padding dropped): stored[run.stored...] = local[run.local...].
void pack_runs(const void* local, const std::vector<Run>& runs, void* stored, size_t itemsize);

}  // namespace tessera::io

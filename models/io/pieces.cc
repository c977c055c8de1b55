// Piece boxes as runs of the flat global index space (see pieces.h).
#include "models/io/pieces.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace tessera::io {
namespace {

constexpr const char* kOp = "pieces";

bool regroups(const PieceBox& b) { return shape_numel(b.view_shape()) == shape_numel(b.global); }

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> out(s.size(), 1);
  for (size_t d = s.size(); d-- > 1;) out[d - 1] = out[d] * s[d];
  return out;
}

}  // namespace

PieceBox whole(const Shape& global) { return PieceBox{.global = global}; }

std::string PieceBox::describe() const {
  const Shape b = box_shape();
  std::vector<int64_t> o = offsets.empty() ? std::vector<int64_t>(b.size(), 0) : offsets;
  std::string s = "box";
  for (size_t d = 0; d < b.size(); ++d)
    s += str_cat(d ? " x [" : " [", o[d], ", ", o[d] + b[d], ")");
  s += " of " + (view.empty() || view == global
                     ? str_cat("global ", shape_str(global))
                     : str_cat("view ", shape_str(view), " of ", shape_str(global)));
  if (begin != 0 || end >= 0) s += str_cat(", elements [", begin, ", ", range_end(), ")");
  return s;
}

void check_box(const PieceBox& b, const std::string& what) {
  const Shape& v = b.view_shape();
  for (int64_t d : b.global)
    TS_CHECK(d >= 0, kOp, what, ": negative global shape ", shape_str(b.global));
  if (!regroups(b)) {
    bool pads = v.size() == b.global.size();
    for (size_t d = 0; pads && d < v.size(); ++d) pads = v[d] >= b.global[d];
    TS_CHECK(pads, kOp, what, ": view ", shape_str(v), " neither regroups nor pads global shape ",
             shape_str(b.global));
  }
  const Shape shape = b.box_shape();
  const std::vector<int64_t> offsets =
      b.offsets.empty() ? std::vector<int64_t>(shape.size(), 0) : b.offsets;
  TS_CHECK(shape.size() == v.size() && offsets.size() == v.size(), kOp, what, ": box of rank ",
           shape.size(), " (offsets ", offsets.size(), ") in a view of rank ", v.size());
  for (size_t d = 0; d < v.size(); ++d)
    TS_CHECK(offsets[d] >= 0 && shape[d] >= 0 && offsets[d] + shape[d] <= v[d], kOp, what,
             ": box dimension ", d, " [", offsets[d], ", ", offsets[d] + shape[d],
             ") outside the view's ", v[d]);
  TS_CHECK(b.begin >= 0 && b.begin <= b.range_end() && b.range_end() <= b.box_numel(), kOp, what,
           ": element range [", b.begin, ", ", b.range_end(), ") outside the box's ",
           b.box_numel());
}

std::vector<Run> piece_runs(const PieceBox& b, const std::string& what) {
  check_box(b, what);
  // A scalar is a one-element row.
  Shape view = b.view_shape(), global = b.global, shape = b.box_shape();
  std::vector<int64_t> offsets =
      b.offsets.empty() ? std::vector<int64_t>(shape.size(), 0) : b.offsets;
  if (view.empty()) view = global = shape = {1}, offsets = {0};
  const size_t n = view.size();
  const bool pad = !regroups(b);
  const std::vector<int64_t> stride = strides_of(pad ? global : view);
  const int64_t row = shape[n - 1];
  std::vector<Run> out;
  const int64_t begin = b.begin, end = b.range_end();
  if (row == 0 || begin >= end) return out;
  // The box's rows (all dimensions but the last) from the one holding `begin`.
  int64_t r = begin / row;
  std::vector<int64_t> idx(n - 1);
  for (size_t d = n - 1, rest = size_t(r); d-- > 0;) {
    idx[d] = int64_t(rest % size_t(shape[d]));
    rest /= size_t(shape[d]);
  }
  int64_t stored = 0;
  for (; r * row < end; ++r) {
    const int64_t lo = std::max(begin, r * row) - r * row;
    const int64_t hi = std::min(end, (r + 1) * row) - r * row;
    int64_t c0 = offsets[n - 1] + lo, c1 = offsets[n - 1] + hi;
    bool inside = true;
    int64_t g = 0;
    for (size_t d = 0; d + 1 < n; ++d) {
      const int64_t at = offsets[d] + idx[d];
      inside = inside && (!pad || at < global[d]);
      g += at * stride[d];
    }
    if (pad) c1 = std::min(c1, global[n - 1]);
    if (inside && c0 < c1) {
      const Run run{g + c0, r * row + lo - begin, stored, c1 - c0};
      Run* last = out.empty() ? nullptr : &out.back();
      if (last && last->global + last->length == run.global &&
          last->local + last->length == run.local)
        last->length += run.length;
      else
        out.push_back(run);
      stored += c1 - c0;
    }
    for (size_t d = n - 1; d-- > 0;) {  // next row
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

int64_t stored_numel(const std::vector<Run>& runs) {
  return runs.empty() ? 0 : runs.back().stored + runs.back().length;
}

int64_t copy_runs(const void* src, const std::vector<Run>& source, void* dst,
                  const std::vector<Run>& target, size_t itemsize) {
  const auto* s = static_cast<const uint8_t*>(src);
  auto* t = static_cast<uint8_t*>(dst);
  int64_t copied = 0;
  // Runs are sorted by global offset: skip to the first source run that can meet each target.
  size_t i = 0;
  for (const Run& want : target) {
    const int64_t wend = want.global + want.length;
    while (i < source.size() && source[i].global + source[i].length <= want.global) ++i;
    for (size_t k = i; k < source.size() && source[k].global < wend; ++k) {
      const int64_t lo = std::max(want.global, source[k].global);
      const int64_t hi = std::min(wend, source[k].global + source[k].length);
      if (lo >= hi) continue;
      std::memcpy(t + size_t(want.local + (lo - want.global)) * itemsize,
                  s + size_t(source[k].stored + (lo - source[k].global)) * itemsize,
                  size_t(hi - lo) * itemsize);
      copied += hi - lo;
    }
  }
  return copied;
}

void pack_runs(const void* local, const std::vector<Run>& runs, void* stored, size_t itemsize) {
  const auto* l = static_cast<const uint8_t*>(local);
  auto* s = static_cast<uint8_t*>(stored);
  for (const Run& r : runs)
    std::memcpy(s + size_t(r.stored) * itemsize, l + size_t(r.local) * itemsize,
                size_t(r.length) * itemsize);
}

}  // namespace tessera::io

// Placement arithmetic (see placement.h).
#include "parallel/tensor/placement.h"

#include "core/error.h"

namespace tessera::parallel::tensor {

Shape Placement::local_view() const {
  Shape out = view_shape();
  for (const ShardSplit& s : splits) {
    TS_ASSERT(s.dim >= 0 && s.dim < int64_t(out.size()) && s.parts > 0 && out[s.dim] % s.parts == 0);
    out[s.dim] /= s.parts;
  }
  return out;
}

std::vector<int64_t> Placement::view_offsets() const {
  // Splits of one dimension nest: each cuts the chunk the earlier ones left.
  Shape extent = view_shape();
  std::vector<int64_t> out(extent.size(), 0);
  for (const ShardSplit& s : splits) {
    extent[s.dim] /= s.parts;
    out[s.dim] += int64_t(s.index) * extent[s.dim];
  }
  return out;
}

bool Placement::padded() const {
  return !view.empty() && shape_numel(view) != shape_numel(global_shape);
}

Shape Placement::local_shape() const {
  const Shape local = local_view();
  if (padded() || view.empty()) return local;
  // A regrouping view merges back: its leading dimensions multiply into the global first one.
  const Shape& g = global_shape;
  const size_t extra = view.size() - g.size();
  Shape out(local.begin() + int64_t(extra), local.end());
  for (size_t d = 0; d < extra; ++d) out[0] *= local[d];
  return out;
}

bool Placement::counted_copy() const {
  for (const ShardReplica& r : replicas)
    if (r.index != 0) return false;
  return true;
}

int Placement::copies() const {
  int n = 1;
  for (const ShardReplica& r : replicas) n *= r.parts;
  return n;
}

std::string Placement::describe() const {
  if (replicated()) return "replicated " + shape_str(global_shape);
  std::string s = "sharded " + shape_str(view_shape());
  for (const ShardSplit& sp : splits)
    s += str_cat(" dim ", sp.dim, " / ", sp.parts, " over ", sp.group);
  for (const ShardReplica& r : replicas) s += str_cat(" x ", r.parts, " copies over ", r.group);
  return s;
}

Placement replicated(const Shape& shape) { return Placement{.global_shape = shape}; }

Placement split(const Shape& shape, int64_t dim, int parts, int index, const std::string& group,
                const Shape& view) {
  Placement p{.global_shape = shape, .view = view};
  const Shape& v = p.view_shape();
  TS_CHECK(dim >= 0 && dim < int64_t(v.size()) && parts > 0 && v[dim] % parts == 0 && index >= 0 &&
               index < parts,
           "placement", "expected dimension ", dim, " of ", shape_str(v), " to split into ", parts,
           " equal parts (chunk ", index, ")");
  p.splits.push_back({.dim = dim, .parts = parts, .index = index, .group = group});
  return p;
}

}  // namespace tessera::parallel::tensor

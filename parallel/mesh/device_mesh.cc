#include "parallel/mesh/device_mesh.h"

#include "core/error.h"

namespace tessera::parallel {

DeviceMesh::DeviceMesh(std::vector<MeshAxis> axes) : axes_(std::move(axes)) {
  for (size_t i = 0; i < axes_.size(); ++i) {
    TS_CHECK(!axes_[i].name.empty(), "mesh", "expected every axis to have a name, got axis ", i,
             " unnamed");
    TS_CHECK(axes_[i].size >= 1, "mesh", "expected axis '", axes_[i].name, "' to have size >= 1, got ",
             axes_[i].size);
    for (size_t j = 0; j < i; ++j) {
      TS_CHECK(axes_[j].name != axes_[i].name, "mesh", "expected unique axis names, got '",
               axes_[i].name, "' twice");
    }
  }
  strides_.assign(axes_.size(), 1);
  for (size_t i = axes_.size(); i-- > 0;) {
    strides_[i] = size_;
    size_ *= axes_[i].size;
  }
}

bool DeviceMesh::has_axis(const std::string& name) const {
  for (const MeshAxis& a : axes_) {
    if (a.name == name) return true;
  }
  return false;
}

int DeviceMesh::axis_index(const std::string& name) const {
  for (size_t i = 0; i < axes_.size(); ++i) {
    if (axes_[i].name == name) return int(i);
  }
  TS_FAIL("mesh", "expected an axis of ", str(), ", got '", name, "'");
}

int DeviceMesh::axis_size(const std::string& name) const { return axes_[size_t(axis_index(name))].size; }

void DeviceMesh::check_rank(int rank) const {
  TS_CHECK(rank >= 0 && rank < size_, "mesh", "expected a rank in [0, ", size_, ") for mesh ", str(),
           ", got ", rank);
}

std::vector<int> DeviceMesh::coords_of(int rank) const {
  check_rank(rank);
  std::vector<int> coords(axes_.size());
  for (size_t i = 0; i < axes_.size(); ++i) coords[i] = rank / strides_[i] % axes_[i].size;
  return coords;
}

int DeviceMesh::rank_of(const std::vector<int>& coords) const {
  TS_CHECK(coords.size() == axes_.size(), "mesh", "expected ", axes_.size(), " coordinates for mesh ",
           str(), ", got ", coords.size());
  int rank = 0;
  for (size_t i = 0; i < axes_.size(); ++i) {
    TS_CHECK(coords[i] >= 0 && coords[i] < axes_[i].size, "mesh", "expected coordinate ", i, " ('",
             axes_[i].name, "') in [0, ", axes_[i].size, "), got ", coords[i]);
    rank += coords[i] * strides_[i];
  }
  return rank;
}

int DeviceMesh::coord(int rank, const std::string& name) const {
  check_rank(rank);
  size_t i = size_t(axis_index(name));
  return rank / strides_[i] % axes_[i].size;
}

std::vector<bool> DeviceMesh::axis_mask(const std::vector<std::string>& axes) const {
  std::vector<bool> mask(axes_.size(), false);
  for (const std::string& name : axes) {
    size_t i = size_t(axis_index(name));
    TS_CHECK(!mask[i], "mesh", "expected each axis once in a group, got '", name, "' twice");
    mask[i] = true;
  }
  return mask;
}

std::vector<int> DeviceMesh::group_ranks(int rank, const std::vector<std::string>& axes) const {
  std::vector<bool> varying = axis_mask(axes);
  std::vector<int> coords = coords_of(rank);
  // Zero the varying coordinates, then count through them like an odometer, last axis fastest.
  for (size_t i = 0; i < coords.size(); ++i) {
    if (varying[i]) coords[i] = 0;
  }
  std::vector<int> ranks;
  while (true) {
    ranks.push_back(rank_of(coords));
    size_t i = coords.size();
    while (i-- > 0) {
      if (!varying[i]) continue;
      if (++coords[i] < axes_[i].size) break;
      coords[i] = 0;
    }
    if (i == size_t(-1)) break;  // every varying coordinate wrapped around
  }
  return ranks;
}

std::vector<std::vector<int>> DeviceMesh::all_groups(const std::vector<std::string>& axes) const {
  std::vector<std::vector<int>> groups;
  std::vector<bool> seen(size_t(size_), false);
  for (int r = 0; r < size_; ++r) {
    if (seen[size_t(r)]) continue;
    groups.push_back(group_ranks(r, axes));
    for (int member : groups.back()) seen[size_t(member)] = true;
  }
  return groups;
}

int DeviceMesh::group_index(int rank, const std::vector<std::string>& axes) const {
  std::vector<std::vector<int>> groups = all_groups(axes);
  for (size_t g = 0; g < groups.size(); ++g) {
    for (int member : groups[g]) {
      if (member == rank) return int(g);
    }
  }
  check_rank(rank);
  return -1;
}

int DeviceMesh::index_in_group(int rank, const std::vector<std::string>& axes) const {
  std::vector<int> group = group_ranks(rank, axes);
  for (size_t i = 0; i < group.size(); ++i) {
    if (group[i] == rank) return int(i);
  }
  return -1;
}

std::string DeviceMesh::str() const {
  std::string s = "(";
  for (size_t i = 0; i < axes_.size(); ++i) {
    s += (i ? ", " : "") + axes_[i].name + "=" + std::to_string(axes_[i].size);
  }
  return s + ")";
}

}  // namespace tessera::parallel

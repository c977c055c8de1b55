// DeviceMesh: a named N-dimensional grid of ranks, row-major (the last axis innermost, so ranks
// that differ only in the last coordinate are consecutive). Pure arithmetic, no communication:
// the parallel context builds its groups from it, and it is tested without MPI.
#pragma once

#include <string>
#include <vector>

namespace tessera::parallel {

struct MeshAxis {
  std::string name;
  int size = 1;
};

class DeviceMesh {
 public:
  // Axes outermost first; names must be unique and non-empty, sizes >= 1.
  explicit DeviceMesh(std::vector<MeshAxis> axes);

  int ndim() const { return int(axes_.size()); }
  // Number of ranks: the product of the axis sizes.
  int size() const { return size_; }
  const std::vector<MeshAxis>& axes() const { return axes_; }
  bool has_axis(const std::string& name) const;
  // Index of the axis `name`; throws naming the known axes when there is none.
  int axis_index(const std::string& name) const;
  int axis_size(const std::string& name) const;

  std::vector<int> coords_of(int rank) const;
  int rank_of(const std::vector<int>& coords) const;
  // The coordinate of `rank` on axis `name`.
  int coord(int rank, const std::string& name) const;

  // The ranks that share every coordinate of `rank` except those on `axes`, in increasing rank
  // order (lexicographic in the varying coordinates, outer axes first). `rank` is among them.
  std::vector<int> group_ranks(int rank, const std::vector<std::string>& axes) const;
  // Every group over `axes`: a partition of all ranks, ordered by each group's smallest rank.
  std::vector<std::vector<int>> all_groups(const std::vector<std::string>& axes) const;
  // Which of all_groups(axes) holds `rank` (a split color), and its position there (a split key).
  int group_index(int rank, const std::vector<std::string>& axes) const;
  int index_in_group(int rank, const std::vector<std::string>& axes) const;

  // "(pipeline=2, data=2, tensor=2)"
  std::string str() const;

 private:
  void check_rank(int rank) const;
  std::vector<bool> axis_mask(const std::vector<std::string>& axes) const;

  std::vector<MeshAxis> axes_;
  std::vector<int> strides_;
  int size_ = 1;
};

}  // namespace tessera::parallel

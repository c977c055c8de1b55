// Which ranks form which group: the mesh a configuration implies and the mesh axes behind every
// named group. Pure functions, tested without MPI; ParallelContext only turns them into
// communicators.
//
// The mesh is (pipeline, data, sequence, <tensor axes>), tensor innermost so a tensor-parallel
// group is a block of consecutive ranks. The tensor axis is factored by mode (t is the rank's
// index inside its tensor group; definitions as in Colossal-AI's process group initialisers):
//   1d    tensor                         t
//   2d    tp_row, tp_col       (q x q)   t = row * q + col
//   2.5d  tp_dep, tp_row, tp_col         t = dep * q * q + row * q + col
//   3d    tp_k, tp_j, tp_i     (d^3)     t = k * d * d + j * d + i
// Groups, by the axes their members differ in (every other coordinate is shared):
//   data, pipeline, sequence             their own axis
//   data_sequence                        data and sequence (gradients under sequence parallelism
//                                        are reduced over both)
//   tensor                               every tensor axis
//   2d_row / 2d_col                      tp_col / tp_row (a grid row: same row, every column)
//   2.5d_row / 2.5d_col / 2.5d_dep       tp_col / tp_row / tp_dep
//   2.5d_xz                              tp_dep and tp_row: the same column across rows and depths
//                                        (Colossal-AI's "col x depth" group)
//   3d_input / 3d_weight / 3d_output     tp_j / tp_i / tp_k
//   3d_input_x_weight                    tp_j and tp_i (same k)
//   3d_output_x_weight                   tp_k and tp_i (same j)
// Within a group, members are in increasing rank order; a rank's index there is its group rank.
//
// One group is not a partition: "embedding", the first and the last pipeline stage of each
// pipeline group (pipeline > 1 only), which sum the gradients of weights tied across them (a
// language model's token embedding and its head). Ranks of the middle stages belong to none.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "parallel/mesh/device_mesh.h"
#include "parallel/mesh/parallel_config.h"

namespace tessera::parallel {

struct GroupSpec {
  std::string name;
  std::vector<std::string> axes;  // the mesh axes the members differ in
};

// The tensor axes of a validated tensor config (outermost first).
std::vector<MeshAxis> tensor_mesh_axes(const TensorParallelConfig& tensor);
// The full mesh of a validated config.
DeviceMesh build_mesh(const ParallelConfig& config);
// Every group the config defines: data, pipeline, sequence, tensor, then the mode's groups.
std::vector<GroupSpec> group_specs(const ParallelConfig& config);

// group name -> every group of that name (a partition of the ranks, each in increasing order).
using GroupLayout = std::map<std::string, std::vector<std::vector<int>>>;
GroupLayout group_layout(const ParallelConfig& config);
// The embedding groups: per pipeline group, its first and last stage's ranks (none when
// pipeline == 1).
std::vector<std::vector<int>> embedding_groups(const ParallelConfig& config);
// The tensor groups alone, on tensor ranks 0 .. size-1 ("tensor" and the mode's groups).
GroupLayout tensor_group_layout(TensorMode mode, int size, int depth = 1);

}  // namespace tessera::parallel

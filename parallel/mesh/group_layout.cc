#include "parallel/mesh/group_layout.h"

#include "core/error.h"

namespace tessera::parallel {
namespace {

std::vector<std::string> names_of(const std::vector<MeshAxis>& axes) {
  std::vector<std::string> names;
  for (const MeshAxis& a : axes) names.push_back(a.name);
  return names;
}

// The groups of the tensor mode, on the tensor axes.
std::vector<GroupSpec> tensor_group_specs(const TensorParallelConfig& tensor) {
  std::vector<GroupSpec> specs = {{"tensor", names_of(tensor_mesh_axes(tensor))}};
  switch (tensor.mode) {
    case TensorMode::one_d:
      break;
    case TensorMode::two_d:
      specs.push_back({"2d_row", {"tp_col"}});
      specs.push_back({"2d_col", {"tp_row"}});
      break;
    case TensorMode::two_point_five_d:
      specs.push_back({"2.5d_row", {"tp_col"}});
      specs.push_back({"2.5d_col", {"tp_row"}});
      specs.push_back({"2.5d_dep", {"tp_dep"}});
      specs.push_back({"2.5d_xz", {"tp_dep", "tp_row"}});
      break;
    case TensorMode::three_d:
      specs.push_back({"3d_input", {"tp_j"}});
      specs.push_back({"3d_weight", {"tp_i"}});
      specs.push_back({"3d_output", {"tp_k"}});
      specs.push_back({"3d_input_x_weight", {"tp_j", "tp_i"}});
      specs.push_back({"3d_output_x_weight", {"tp_k", "tp_i"}});
      break;
  }
  return specs;
}

GroupLayout layout_of(const DeviceMesh& mesh, const std::vector<GroupSpec>& specs) {
  GroupLayout layout;
  for (const GroupSpec& spec : specs) layout[spec.name] = mesh.all_groups(spec.axes);
  return layout;
}

}  // namespace

std::vector<MeshAxis> tensor_mesh_axes(const TensorParallelConfig& tensor) {
  const int q = tensor_grid_dim(tensor);
  switch (tensor.mode) {
    case TensorMode::one_d:
      return {{"tensor", tensor.size}};
    case TensorMode::two_d:
      return {{"tp_row", q}, {"tp_col", q}};
    case TensorMode::two_point_five_d:
      return {{"tp_dep", tensor.depth}, {"tp_row", q}, {"tp_col", q}};
    case TensorMode::three_d:
      return {{"tp_k", q}, {"tp_j", q}, {"tp_i", q}};
  }
  TS_FAIL("config", "expected a TensorMode, got the value ", int(tensor.mode));
}

DeviceMesh build_mesh(const ParallelConfig& config) {
  config.validate();
  std::vector<MeshAxis> axes = {
      {"pipeline", config.pipeline}, {"data", config.data}, {"sequence", config.sequence}};
  for (const MeshAxis& a : tensor_mesh_axes(config.tensor)) axes.push_back(a);
  return DeviceMesh(std::move(axes));
}

std::vector<GroupSpec> group_specs(const ParallelConfig& config) {
  config.validate();
  std::vector<GroupSpec> specs = {{"data", {"data"}},
                                  {"pipeline", {"pipeline"}},
                                  {"sequence", {"sequence"}},
                                  {"data_sequence", {"data", "sequence"}}};
  for (GroupSpec& s : tensor_group_specs(config.tensor)) specs.push_back(std::move(s));
  return specs;
}

GroupLayout group_layout(const ParallelConfig& config) {
  return layout_of(build_mesh(config), group_specs(config));
}

std::vector<std::vector<int>> embedding_groups(const ParallelConfig& config) {
  config.validate();
  if (config.pipeline == 1) return {};
  std::vector<std::vector<int>> groups;
  for (const std::vector<int>& stages : build_mesh(config).all_groups({"pipeline"}))
    groups.push_back({stages.front(), stages.back()});
  return groups;
}

GroupLayout tensor_group_layout(TensorMode mode, int size, int depth) {
  TensorParallelConfig tensor{size, mode, depth};
  ParallelConfig config;
  config.tensor = tensor;
  config.validate();
  return layout_of(DeviceMesh(tensor_mesh_axes(tensor)), tensor_group_specs(tensor));
}

}  // namespace tessera::parallel

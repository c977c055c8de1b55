// The 3D cube and its activation layout (see cube_3d.h).
#include "parallel/tensor/cube_3d.h"

#include "core/error.h"

namespace tessera::parallel::tensor {

void Cube3D::check(const char* op) const {
  const int present = int(input != nullptr) + int(weight != nullptr) + int(output != nullptr);
  TS_CHECK(present == 0 || present == 3, op,
           "expected the input, weight and output groups of a 3D cube (or none), got ", present,
           " of the 3");
  if (present == 0) return;
  TS_CHECK(input->size() == weight->size() && input->size() == output->size(), op,
           "expected three groups of one size q, got input '", input->name(), "' of ",
           input->size(), ", weight '", weight->name(), "' of ", weight->size(), " and output '",
           output->name(), "' of ", output->size(), " ranks");
  TS_CHECK(input->device_type() == weight->device_type() &&
               input->device_type() == output->device_type(),
           op, "expected the cube's groups on one device type, got ", input->backend(), ", ",
           weight->backend(), " and ", output->backend());
}

Cube3D cube_3d(const ParallelContext& context) {
  const TensorParallelConfig& tensor = context.config().tensor;
  TS_CHECK(tensor.size > 1 && tensor.mode == TensorMode::three_d, "cube_3d",
           "expected a tensor-parallel context in mode 3d for the 3D cube, got mode '", tensor.mode,
           "' with tensor size ", tensor.size);
  return {.input = context.group("3d_input"),
          .weight = context.group("3d_weight"),
          .output = context.group("3d_output")};
}

namespace {

void check_layout(const char* op, const Tensor& x, const Cube3D& cube) {
  cube.check(op);
  TS_CHECK(x.defined() && x.dim() >= 2, op, "expected an activation (B, ..., C), got ",
           x.defined() ? x.describe() : "undefined");
}

}  // namespace

Tensor split_3d(const Tensor& x, const Cube3D& cube) {
  check_layout("split_3d", x, cube);
  const int64_t q = cube.q();
  TS_CHECK(x.size(0) % q == 0 && x.size(-1) % (q * q) == 0, "split_3d",
           "expected the batch (dim 0) of shape ", shape_str(x.shape()),
           " divisible by the cube side q = ", q, " and its features (last dim) by q^2 = ", q * q);
  // Batch chunk i, then feature block k, then chunk j of that block: feature chunk k q + j.
  const Tensor rows = scatter_to_region(x, 0, cube.weight);
  return scatter_to_region(scatter_to_region(rows, -1, cube.output), -1, cube.input);
}

Tensor gather_3d(const Tensor& x, const Cube3D& cube) {
  check_layout("gather_3d", x, cube);
  const Tensor block = gather_from_region(x, -1, cube.input);  // (B / q, ..., C / q): block k
  return gather_from_region(gather_from_region(block, -1, cube.output), 0, cube.weight);
}

}  // namespace tessera::parallel::tensor

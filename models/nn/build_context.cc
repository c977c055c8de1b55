// BuildContext (see build_context.h).
#include "models/nn/build_context.h"

namespace tessera::nn {

std::optional<parallel::TensorMode> BuildContext::tensor_mode() const {
  if (!tensor_parallel()) return std::nullopt;
  return parallel_->config().tensor.mode;
}

const char* BuildContext::tensor_mode_name() const {
  return tensor_parallel() ? parallel::tensor_mode_name(*tensor_mode()) : "none";
}

parallel::tensor::SummaGrid BuildContext::summa_grid() const {
  TS_CHECK(tensor_2d(), "BuildContext",
           "expected a tensor-parallel context in mode 2d or 2.5d for the SUMMA grid, got mode '",
           tensor_mode_name(), "' with tensor size ", tensor_size());
  if (tensor_mode() == parallel::TensorMode::two_point_five_d)
    return {.row = parallel_->group("2.5d_row"),
            .col = parallel_->group("2.5d_col"),
            .dep = parallel_->group("2.5d_dep"),
            .batch = parallel_->group("2.5d_xz")};
  return {.row = parallel_->group("2d_row"), .col = parallel_->group("2d_col")};
}

parallel::tensor::Cube3D BuildContext::cube(const char* op) const {
  TS_CHECK(parallel_ != nullptr, op,
           "expected a build context with a parallel context in tensor mode 3d, got a serial one");
  return parallel::tensor::cube_3d(*parallel_);
}

}  // namespace tessera::nn

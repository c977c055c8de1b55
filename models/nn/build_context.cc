// BuildContext (see build_context.h).
#include "models/nn/build_context.h"

namespace tessera::nn {

const std::string& BuildContext::tensor_mode() const {
  static const std::string kSerial = "none";
  return tensor_parallel() ? parallel_->config().tensor.mode : kSerial;
}

parallel::tensor::SummaGrid BuildContext::summa_grid() const {
  TS_CHECK(tensor_2d(), "BuildContext",
           "expected a tensor-parallel context in mode 2d or 2.5d for the SUMMA grid, got mode '",
           tensor_mode(), "' with tensor size ", tensor_size());
  if (tensor_mode() == "2.5d")
    return {.row = parallel_->group("2.5d_row"),
            .col = parallel_->group("2.5d_col"),
            .dep = parallel_->group("2.5d_dep"),
            .batch = parallel_->group("2.5d_xz")};
  return {.row = parallel_->group("2d_row"), .col = parallel_->group("2d_col")};
}

}  // namespace tessera::nn

// BuildContext (see build_context.h).
#include "models/nn/build_context.h"

namespace tessera::nn {

const std::string& BuildContext::tensor_mode() const {
  static const std::string kSerial = "none";
  return tensor_parallel() ? parallel_->config().tensor.mode : kSerial;
}

parallel::tensor::SummaGrid BuildContext::summa_grid() const {
  TS_CHECK(tensor_parallel() && tensor_mode() == "2d", "BuildContext",
           "expected a tensor-parallel context in mode 2d for the SUMMA grid, got mode '",
           tensor_mode(), "' with tensor size ", tensor_size());
  return {.row = parallel_->group("2d_row"), .col = parallel_->group("2d_col")};
}

}  // namespace tessera::nn

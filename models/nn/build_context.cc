// BuildContext (see build_context.h).
#include "models/nn/build_context.h"

namespace tessera::nn {

const std::string& BuildContext::tensor_mode() const {
  static const std::string kSerial = "none";
  return tensor_parallel() ? parallel_->config().tensor.mode : kSerial;
}

}  // namespace tessera::nn

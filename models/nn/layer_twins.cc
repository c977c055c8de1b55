// The choice of a row of the twin table (see layer_twins.h).
#include "models/nn/layer_twins.h"

namespace tessera::nn {

const LayerTwins& layer_twins(const BuildContext& ctx) {
  const std::optional<parallel::TensorMode> mode = ctx.tensor_mode();
  if (!mode) return serial_twins();
  switch (*mode) {
    case parallel::TensorMode::one_d:
      return twins_1d();
    case parallel::TensorMode::two_d:
    case parallel::TensorMode::two_point_five_d:
      return twins_2d();
    case parallel::TensorMode::three_d:
      return twins_3d();
  }
  TS_FAIL("layer_twins", "expected a TensorMode, got the value ", int(*mode));
}

}  // namespace tessera::nn

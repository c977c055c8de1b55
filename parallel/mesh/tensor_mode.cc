// TensorMode's names (see tensor_mode.h).
#include "parallel/mesh/tensor_mode.h"

#include "core/error.h"

namespace tessera::parallel {

TensorMode tensor_mode_from_name(const std::string& name) {
  for (TensorMode mode :
       {TensorMode::one_d, TensorMode::two_d, TensorMode::two_point_five_d, TensorMode::three_d}) {
    if (name == tensor_mode_name(mode)) return mode;
  }
  TS_FAIL("config", "expected parallel.tensor.mode to be one of 1d, 2d, 2.5d, 3d, got '", name,
          "'");
}

const char* tensor_mode_name(TensorMode mode) {
  switch (mode) {
    case TensorMode::one_d:
      return "1d";
    case TensorMode::two_d:
      return "2d";
    case TensorMode::two_point_five_d:
      return "2.5d";
    case TensorMode::three_d:
      return "3d";
  }
  TS_FAIL("config", "expected a TensorMode, got the value ", int(mode));
}

std::ostream& operator<<(std::ostream& os, TensorMode mode) { return os << tensor_mode_name(mode); }

}  // namespace tessera::parallel

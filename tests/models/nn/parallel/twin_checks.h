// Checks shared by the tensor-parallel twin programs (run under mpirun): the relative error the
// issue's 1e-5 bound reads, as a failing RANK_CHECK.
#pragma once

#include <cmath>
#include <string>

#include "core/tensor.h"
#include "tests/parallel/rank_check.h"

namespace tessera::parallel::testing {

inline constexpr double kTwinRelTol = 1e-5;

// max |a - b| / max(max |b|, tiny).
inline double rel_error(const Tensor& a, const Tensor& b) {
  Tensor x = a.to(DType::f32).contiguous(), y = b.to(DType::f32).contiguous();
  RANK_CHECK(x.shape() == y.shape(), "shapes ", shape_str(x.shape()), " vs ", shape_str(y.shape()));
  double diff = 0, scale = 1e-30;
  for (int64_t i = 0; i < x.numel(); ++i) {
    diff = std::fmax(diff, std::fabs(double(x.data<float>()[i]) - double(y.data<float>()[i])));
    scale = std::fmax(scale, std::fabs(double(y.data<float>()[i])));
  }
  return diff / scale;
}

inline void check_close(const Tensor& got, const Tensor& want, const std::string& what) {
  RANK_CHECK(got.defined(), what, ": undefined");
  const double e = rel_error(got, want);
  RANK_CHECK(e <= kTwinRelTol, what, ": relative error ", e);
}

}  // namespace tessera::parallel::testing

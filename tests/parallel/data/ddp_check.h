// Checks for the data-parallel rank programs: a failed check throws, and run_distributed turns it
// into a job abort naming the rank, so the wrapper script sees a non-zero exit and the reason.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/error.h"
#include "core/tensor.h"

namespace tessera::parallel::ddp_testing {

inline int64_t& checks_passed() {
  static int64_t n = 0;
  return n;
}

// max |a - b| over the elements of two f32 tensors of one shape, and max |b|.
struct Diff {
  double max_abs_diff = 0;
  double max_abs_ref = 0;
};
inline Diff diff(const Tensor& a, const Tensor& b) {
  TS_CHECK(a.shape() == b.shape(), "diff", "expected equal shapes, got ", a.describe(), " and ",
           b.describe());
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  const float* pa = ac.data<float>();
  const float* pb = bc.data<float>();
  Diff d;
  for (int64_t i = 0; i < a.numel(); ++i) {
    d.max_abs_diff = std::max(d.max_abs_diff, double(std::fabs(pa[i] - pb[i])));
    d.max_abs_ref = std::max(d.max_abs_ref, double(std::fabs(pb[i])));
  }
  return d;
}

}  // namespace tessera::parallel::ddp_testing

#define DDP_CHECK(cond, ...)                                                                       \
  do {                                                                                             \
    if (!(cond))                                                                                   \
      throw ::tessera::ValueError("check", ::tessera::str_cat(#cond, " failed at ", __FILE__, ":", \
                                                              __LINE__, ": ", __VA_ARGS__));       \
    ++::tessera::parallel::ddp_testing::checks_passed();                                           \
  } while (0)

// Tensors equal within `rel` of the reference's largest magnitude (exactly equal when rel is 0).
#define DDP_CHECK_CLOSE(got, want, rel, ...)                                                    \
  do {                                                                                          \
    const auto ddp_d = ::tessera::parallel::ddp_testing::diff((got), (want));                   \
    DDP_CHECK(ddp_d.max_abs_diff <= (rel)*ddp_d.max_abs_ref, "max |diff| ", ddp_d.max_abs_diff, \
              " vs max |ref| ", ddp_d.max_abs_ref, " (rel ", (rel), ") ", __VA_ARGS__);         \
  } while (0)

// Attention test cases shared by the CUDA tests (tests/kernels/cuda) and the SIMT-emulated tests
// (tests/kernels/emulated): the case description, its inputs (dense, permuted or column-major
// views), the padding mask with a fully masked batch, and the comparison with the CPU kernel.
#pragma once

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "core/factory.h"
#include "tests/testing/compare.h"

namespace tessera::testing::attention {

struct Case {
  int64_t B, H, T, S, D;
  DType dtype;
  bool causal = false;
  bool mask = false;
  float dropout = 0.0f;
  bool strided = false;       // inputs as permuted (B, L, H, D) storage: rows still 16-byte aligned
  bool column_major = false;  // inputs as transposed (B, H, D, L) storage: unit stride across rows
  float scale = 0.0f;
};

inline std::string name_of(const Case& c) {
  return "B" + std::to_string(c.B) + " H" + std::to_string(c.H) + " T" + std::to_string(c.T) +
         " S" + std::to_string(c.S) + " D" + std::to_string(c.D) + " " + dtype_name(c.dtype) +
         (c.causal ? " causal" : "") + (c.mask ? " mask" : "") + (c.dropout > 0 ? " dropout" : "") +
         (c.strided ? " strided" : "") + (c.column_major ? " column-major" : "");
}

// A (B, H, L, D) input on `device`; the values depend only on the seed, so copies on different
// devices hold the same numbers.
inline Tensor head_input(const Case& c, int64_t L, uint64_t seed, Device device = kCPU) {
  Generator gen(seed);
  if (c.column_major) {
    return randn({c.B, c.H, c.D, L}, {.dtype = c.dtype}, &gen).to(device).transpose(2, 3);
  }
  if (c.strided) {
    return randn({c.B, L, c.H, c.D}, {.dtype = c.dtype}, &gen).to(device).permute({0, 2, 1, 3});
  }
  return randn({c.B, c.H, L, c.D}, {.dtype = c.dtype}, &gen).to(device);
}

// Padding mask (B, S) on the CPU: batch 0 attends to every key, batch 1 to none (fully masked
// rows), the others to a pseudo-random subset.
inline Tensor padding_mask(const Case& c) {
  std::vector<float> m(size_t(c.B * c.S));
  for (int64_t b = 0; b < c.B; ++b) {
    for (int64_t s = 0; s < c.S; ++s) {
      const bool keep = b == 0 ? true : (b == 1 ? false : ((s * 7 + b * 3) % 5) != 0);
      m[size_t(b * c.S + s)] = keep ? 1.0f : 0.0f;
    }
  }
  return from_vector(m, {c.B, c.S}, {.dtype = DType::b8});
}

// Tolerance relative to the largest reference magnitude (at least the O(1) input scale): f32 agrees
// to rounding; 16-bit results differ by about one rounding of the output dtype, also on the tensor
// cores, which round P and dS to the input's 16 bits before multiplying (as flash attention does).
inline double relative_tolerance(DType t) {
  return t == DType::f32 ? 2e-5 : (t == DType::f16 ? 2e-3 : 1.6e-2);
}

inline void require_near(const Tensor& got, const Tensor& ref, DType dtype,
                         const std::string& what) {
  double scale = 1.0;  // exact zeros are common; the inputs are O(1)
  for (double x : to_doubles(ref)) {
    if (std::isfinite(x)) scale = std::max(scale, std::fabs(x));
  }
  INFO(what);
  const double tol = relative_tolerance(dtype);
  require_close(got, ref, tol, tol * scale);
}

}  // namespace tessera::testing::attention

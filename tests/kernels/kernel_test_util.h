// Helpers shared by the kernel tests: random inputs of any dtype, element values of any view as
// double, and an element-wise closeness check that names the first bad element.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "core/factory.h"
#include "core/tensor.h"

namespace tessera::kernel_test {

// |got - ref| <= rtol * |ref| + atol; zero means exact.
struct Tol {
  double rtol = 0.0, atol = 0.0;
};

// The rounding of each floating dtype (f32 results are O(1) here; see each test's note).
inline Tol tol_for(DType t) {
  switch (t) {
    case DType::f16: return {1e-3, 1e-6};
    case DType::bf16: return {8e-3, 1e-6};
    case DType::f32: return {1e-6, 1e-7};
    default: return {};
  }
}

// v rounded to dtype t (so a reference overflows to inf where the dtype does).
inline double round_to(DType t, double v) {
  return dispatch_dtype(t, [&]<typename T>() {
    if constexpr (std::is_same_v<T, bool>) {
      return v;
    } else {
      return to_double(from_double<T>(v));
    }
  });
}

// Logical (row-major) element values of any view, as double.
inline std::vector<double> values(const Tensor& t) {
  Tensor c = t.contiguous();
  std::vector<double> v(size_t(c.numel()));
  dispatch_dtype(c.dtype(), [&]<typename T>() {
    const T* p = c.data<T>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = to_double(p[i]);
  });
  return v;
}

inline Tensor uniform_tensor(const Shape& shape, DType dt, double lo, double hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(size_t(shape_numel(shape)));
  for (double& x : v) x = u(rng);
  return from_vector<double>(v, shape, {.dtype = dt});
}

// Small integers in [lo, hi] as any dtype, so comparisons see ties and logic sees zeros.
inline Tensor int_tensor(const Shape& shape, DType dt, int lo, int hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> u(lo, hi);
  std::vector<double> v(size_t(shape_numel(shape)));
  for (double& x : v) x = u(rng);
  return from_vector<double>(v, shape, {.dtype = dt});
}

// NaN must match NaN, infinities must be equal, finite values within tol.
inline void check_close(const std::vector<double>& got, const std::vector<double>& ref, Tol tol,
                        const std::string& what) {
  REQUIRE(got.size() == ref.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], r = ref[i];
    bool ok;
    if (std::isnan(r)) {
      ok = std::isnan(g);
    } else if (std::isinf(r)) {
      ok = g == r;
    } else {
      ok = std::fabs(g - r) <= tol.rtol * std::fabs(r) + tol.atol;
    }
    if (!ok) {
      INFO(what << ": element " << i << " got " << g << ", expected " << r);
      REQUIRE(ok);
    }
  }
}

}  // namespace tessera::kernel_test

// Closeness checks for tests (see compare.h).
#include "tests/testing/compare.h"

#include <catch2/catch.hpp>
#include <cmath>

namespace tessera::testing {

std::vector<double> to_doubles(const Tensor& t) {
  Tensor c = t.to(kCPU).contiguous();
  std::vector<double> out(size_t(c.numel()));
  dispatch_dtype(c.dtype(), [&]<typename T>() {
    const T* p = static_cast<const T*>(c.data_ptr());
    for (size_t i = 0; i < out.size(); ++i) out[i] = to_double(p[i]);
  });
  return out;
}

std::string index_str(int64_t flat, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    int64_t n = std::max<int64_t>(shape[d], 1);
    idx[d] = flat % n;
    flat /= n;
  }
  return shape_str(idx);
}

void require_close(const Tensor& actual, const Tensor& expected, double rtol, double atol) {
  INFO("actual " << actual.describe() << ", expected " << expected.describe());
  REQUIRE(actual.defined());
  REQUIRE(expected.defined());
  REQUIRE(shape_str(actual.shape()) == shape_str(expected.shape()));
  std::vector<double> a = to_doubles(actual), e = to_doubles(expected);
  int64_t worst = -1, bad = 0;
  double worst_excess = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(e[i])) {
      if (std::isnan(a[i]) && std::isnan(e[i])) continue;
      ++bad;
      worst = int64_t(i);
      worst_excess = INFINITY;
      continue;
    }
    if (a[i] == e[i]) continue;  // equal infinities
    double tol = atol + rtol * std::fabs(e[i]);
    double excess = std::fabs(a[i] - e[i]) / tol;
    if (!(excess <= 1.0)) {
      ++bad;
      if (!(excess <= worst_excess)) {
        worst_excess = excess;
        worst = int64_t(i);
      }
    }
  }
  if (bad > 0) {
    FAIL(bad << " of " << a.size() << " elements differ (rtol " << rtol << ", atol " << atol
              << "); worst at " << index_str(worst, actual.shape()) << ": actual " << a[size_t(worst)]
              << ", expected " << e[size_t(worst)]);
  }
}

}  // namespace tessera::testing

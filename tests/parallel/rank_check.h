// Checks for the programs that run under mpirun: a failed check throws, and run_distributed turns
// the exception into a job abort whose message names the rank, so the wrapper script sees a
// non-zero exit and the reason.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "core/error.h"
#include "core/tensor.h"

namespace tessera::parallel::testing {

inline int64_t& checks_passed() {
  static int64_t n = 0;
  return n;
}

// Element i of any CPU tensor as double.
inline double element(const Tensor& t, int64_t i) {
  return dispatch_dtype(t.dtype(), [&]<typename T>() { return to_double(t.data<T>()[i]); });
}

// v rounded to t's dtype, as double.
inline double as_dtype(DType dtype, double v) {
  return dispatch_dtype(dtype, [&]<typename T>() { return to_double(from_double<T>(v)); });
}

// How far a reduced value may sit from the serial result: exact for integers and bools; for
// floats a few units in the last place, since MPI may sum in another order.
inline double tolerance(DType dtype) {
  switch (dtype) {
    case DType::f32: return 1e-6;
    case DType::f16: return 2e-3;
    case DType::bf16: return 1.6e-2;
    default: return 0.0;
  }
}

// The message of the E (ValueError unless named) `fn` throws ("" when it throws none).
template <typename E = ValueError, typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace tessera::parallel::testing

#define RANK_CHECK(cond, ...)                                                                   \
  do {                                                                                          \
    if (!(cond))                                                                                \
      throw ::tessera::ValueError("check", ::tessera::str_cat(#cond, " failed at ", __FILE__, ":", \
                                                              __LINE__, ": ", __VA_ARGS__));    \
    ++::tessera::parallel::testing::checks_passed();                                            \
  } while (0)

// got == want within the dtype's tolerance (relative, with an absolute floor of one).
#define RANK_CHECK_CLOSE(dtype, got, want, ...)                                                 \
  RANK_CHECK(std::fabs((got) - (want)) <=                                                       \
                 ::tessera::parallel::testing::tolerance(dtype) * std::fmax(1.0, std::fabs(want)), \
             "got ", (got), ", want ", (want), " (", ::tessera::dtype_name(dtype), ") ", __VA_ARGS__)

// Tensor comparison helpers for tests: element values as doubles, and a closeness assertion that
// names the worst mismatching element.
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"

namespace tessera::testing {

// The elements of t in row-major order (any dtype, layout or device), as doubles.
std::vector<double> to_doubles(const Tensor& t);

// "(1, 2)" for flat index 5 of shape (2, 3).
std::string index_str(int64_t flat, const Shape& shape);

// Fails the current Catch2 test unless shapes match and every element satisfies
// |actual - expected| <= atol + rtol * |expected| (NaNs must match NaNs). The failure message names
// the worst element (index, both values), the number of mismatches and both tensors' descriptions.
void require_close(const Tensor& actual, const Tensor& expected, double rtol = 1e-5, double atol = 1e-6);

}  // namespace tessera::testing

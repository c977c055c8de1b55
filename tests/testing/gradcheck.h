// The shared finite-difference gradient checker: compares the analytic gradients autograd computes
// with central differences, element by element, for every input that requires grad.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace tessera::testing {

struct GradcheckOptions {
  double eps = 1e-3;   // finite-difference step (in the input's units)
  double atol = 1e-3;  // pass when |analytic - numeric| <= atol + rtol * |numeric|
  double rtol = 1e-2;
  uint64_t seed = 1234;  // for the fixed random weights that turn the output into a scalar
};

struct GradcheckResult {
  bool ok = true;
  // On failure: which input and element (multi-index), analytic and numeric values, and the
  // number of elements out of tolerance. On success, a one-line summary.
  std::string message;
};

// Checks d(sum(fn(inputs) * w))/d(input) for a fixed random w, for every input that requires grad
// (f32 leaves, contiguous or not; no two elements may share memory). Inputs that do not reach the
// output must get an undefined or zero gradient. fn must be deterministic.
GradcheckResult check_gradients(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                                const std::vector<Tensor>& inputs, const GradcheckOptions& opts = {});

// check_gradients() for Catch2: on failure the message is logged with UNSCOPED_INFO (it shows with
// the next assertion) and false is returned, so write CHECK(gradcheck(fn, inputs)).
bool gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& inputs,
               const GradcheckOptions& opts = {});

}  // namespace tessera::testing

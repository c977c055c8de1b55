// Runs PyTorch reference fixture cases through Tessera: builds the inputs (applying the recorded
// views with the differentiable ops), calls the op through a per-family dispatch table, runs
// backward of sum(out * w) and compares outputs and input gradients with the stored values.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "tests/testing/fixtures.h"

namespace tessera::reference {

// inputs: the op's operands after views, in fixture order; params: the case's "params" object.
using OpFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs,
                                               const nlohmann::json& params)>;
using OpTable = std::map<std::string, OpFn>;

// An element passes when |actual - expected| <= atol * max(1, max|expected|) + rtol * |expected|:
// atol is relative to the largest element of that output or gradient, so an element that is a
// small difference of large f32 terms (a cancellation) is judged at the tensor's own scale.
struct Tolerance {
  double rtol = 1e-5;
  double atol = 1e-5;
};

struct CaseReport {
  std::string name;
  std::string op;
  bool passed = false;
  std::string message;      // what differed, or the exception text; empty when passed
  int outputs_checked = 0;  // outputs that matched
  int grads_checked =
      0;  // input gradients that matched (an accepted all-zero undefined one is not counted)
  double worst_ratio = 0.0;  // largest |actual - expected| / allowed over the compared elements
};

// Runs one case. Never throws: an unknown op, an exception from the op or a mismatch is a failure.
CaseReport run_case(const testing::FixtureCase& c, const OpTable& table, const Tolerance& tol);

// Loads tests/reference/fixtures/<family>.json, runs every case (none is skipped), fails the
// current Catch2 test once per failing case with its report, and prints "<family>: P/N cases
// passed". Returns the reports.
std::vector<CaseReport> check_family(const std::string& family, const OpTable& table,
                                     const Tolerance& tol = {});

// Parameter helpers.
std::vector<int64_t> int_list(const nlohmann::json& params, const char* key);

}  // namespace tessera::reference

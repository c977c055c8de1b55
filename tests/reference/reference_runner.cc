// One reference case end to end: inputs, views, op, values, backward, gradients (see the header).
#include "tests/reference/reference_runner.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <iostream>
#include <optional>
#include <sstream>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "tests/testing/compare.h"

namespace tessera::reference {

namespace {

using testing::FixtureCase;
using testing::FixtureTensor;

Tensor apply_view(const Tensor& x, const testing::FixtureView& v) {
  if (v.kind == "transpose" && v.args.size() == 2) return transpose(x, v.args[0], v.args[1]);
  if (v.kind == "slice" && v.args.size() == 4)
    return slice(x, v.args[0], v.args[1], v.args[2], v.args[3]);
  throw std::runtime_error("[reference] unknown view '" + v.kind + "'");
}

// Empty when `actual` matches `expected`, else a description naming the worst element.
// worst_ratio_seen: raised to the largest |diff| / allowed seen (the margin left by the tolerance).
std::optional<std::string> compare(const Tensor& actual, const FixtureTensor& expected,
                                   const Tolerance& tol, double& worst_ratio_seen) {
  std::ostringstream msg;
  if (!actual.defined()) return "undefined tensor";
  if (actual.shape() != expected.shape) {
    msg << "expected shape " << shape_str(expected.shape) << ", got " << actual.describe();
    return msg.str();
  }
  if (actual.dtype() != DType::f32) {
    msg << "expected dtype f32, got " << actual.describe();
    return msg.str();
  }
  const std::vector<double> a = testing::to_doubles(actual);
  const std::vector<double>& e = expected.values;
  double scale = 1.0;
  for (double v : e) scale = std::max(scale, std::abs(v));
  int64_t worst = -1, bad = 0;
  double worst_ratio = 0.0;
  for (size_t i = 0; i < e.size(); ++i) {
    const double bound = tol.atol * scale + tol.rtol * std::abs(e[i]);
    const double diff = std::abs(a[i] - e[i]);
    const double ratio = std::isfinite(a[i]) ? diff / bound : INFINITY;
    if (ratio > 1.0) ++bad;
    if (worst < 0 || ratio > worst_ratio) worst = int64_t(i), worst_ratio = ratio;
  }
  worst_ratio_seen = std::max(worst_ratio_seen, worst_ratio);
  if (bad == 0) return std::nullopt;
  msg.precision(9);
  msg << bad << " of " << e.size() << " elements differ; worst at "
      << testing::index_str(worst, expected.shape) << ": expected " << e[worst] << ", got "
      << a[worst] << " (|diff| " << std::abs(a[worst] - e[worst]) << ", allowed "
      << tol.atol * scale + tol.rtol * std::abs(e[worst]) << ")";
  return msg.str();
}

bool all_zero(const FixtureTensor& t) {
  return std::all_of(t.values.begin(), t.values.end(), [](double v) { return v == 0.0; });
}

// Runs the case; returns the list of problems (empty when it passes). Exceptions propagate.
std::vector<std::string> run_checks(const FixtureCase& c, const OpFn& fn, const Tolerance& tol,
                                    CaseReport& stats) {
  std::vector<std::string> problems;
  std::vector<Tensor> leaves, args;
  for (const FixtureTensor& in : c.inputs) {
    leaves.push_back(in.to_tensor());
    Tensor arg = leaves.back();
    for (const auto& v : in.views) arg = apply_view(arg, v);
    args.push_back(arg);
  }
  std::vector<Tensor> outs = fn(args, c.params);
  if (outs.size() != c.outputs.size()) {
    problems.push_back("expected " + std::to_string(c.outputs.size()) + " outputs, got " +
                       std::to_string(outs.size()));
    return problems;
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    if (auto err = compare(outs[i], c.outputs[i], tol, stats.worst_ratio)) {
      problems.push_back("output " + std::to_string(i) + ": " + *err);
    } else {
      ++stats.outputs_checked;
    }
  }
  if (!problems.empty()) return problems;  // gradients of wrong values say nothing new

  // An output without history (sign: "gradient 0") is left out of the roots; the inputs it came
  // from then get no gradient, which is accepted below only where PyTorch's is identically zero.
  std::vector<Tensor> roots, ws;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!outs[i].requires_grad()) continue;
    roots.push_back(outs[i]);
    ws.push_back(c.weights[i].to_tensor());
  }
  if (!roots.empty()) autograd::backward(roots, ws);
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (!c.grads[i]) continue;
    const Tensor g = leaves[i].grad();
    if (!g.defined() && all_zero(*c.grads[i])) continue;
    if (!g.defined()) {
      problems.push_back("grad of input " + std::to_string(i) + ": no gradient reached it");
    } else if (auto err = compare(g, *c.grads[i], tol, stats.worst_ratio)) {
      problems.push_back("grad of input " + std::to_string(i) + ": " + *err);
    } else {
      ++stats.grads_checked;
    }
  }
  return problems;
}

}  // namespace

std::vector<int64_t> int_list(const nlohmann::json& params, const char* key) {
  return params.at(key).get<std::vector<int64_t>>();
}

CaseReport run_case(const FixtureCase& c, const OpTable& table, const Tolerance& tol) {
  CaseReport report;
  report.name = c.name;
  report.op = c.op;
  auto it = table.find(c.op);
  if (it == table.end()) {
    report.message = "no dispatch entry for op '" + c.op + "'";
    return report;
  }
  try {
    std::vector<std::string> problems = run_checks(c, it->second, tol, report);
    for (const std::string& p : problems)
      report.message += (report.message.empty() ? "" : "; ") + p;
    report.passed = problems.empty();
  } catch (const std::exception& e) {
    report.message = std::string("threw: ") + e.what();
  }
  return report;
}

std::vector<CaseReport> check_family(const std::string& family, const OpTable& table,
                                     const Tolerance& tol) {
  const std::string path = testing::fixture_path("tests/reference/fixtures/" + family + ".json");
  const testing::FixtureFile file = testing::load_fixture_file(path);
  REQUIRE(file.family == family);
  REQUIRE(!file.cases.empty());
  std::vector<CaseReport> reports;
  int passed = 0, outputs = 0, grads = 0;
  double worst = 0.0;
  for (const FixtureCase& c : file.cases) {
    reports.push_back(run_case(c, table, tol));
    const CaseReport& r = reports.back();
    outputs += r.outputs_checked;
    grads += r.grads_checked;
    if (r.passed) worst = std::max(worst, r.worst_ratio);
    if (r.passed) {
      ++passed;
    } else {
      FAIL_CHECK("[" << family << "] case '" << r.name << "' (op " << r.op << "): " << r.message);
    }
  }
  std::cout << "[reference] " << family << ": " << passed << "/" << file.cases.size()
            << " cases passed, " << outputs << " outputs and " << grads
            << " gradients matched, largest error " << worst
            << " of the allowed (reference: " << file.compute << "; rtol " << tol.rtol << ", atol "
            << tol.atol << " x max(1, max|expected|))" << std::endl;
  CHECK(passed == int(file.cases.size()));
  return reports;
}

}  // namespace tessera::reference

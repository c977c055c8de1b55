// The reference harness itself: fixture files parse as the generator wrote them, and run_case fails
// (naming the case, what differs and the worst element) on unknown ops, wrong values, wrong
// gradients and exceptions, so a passing reference test means something.
#include "tests/reference/reference_runner.h"

#include <catch2/catch.hpp>
#include <stdexcept>

#include "tests/testing/fixtures.h"

namespace tessera::reference {
namespace {

using testing::FixtureCase;
using testing::FixtureTensor;
using Ins = std::vector<Tensor>;

FixtureTensor f32_tensor(Shape shape, std::vector<double> values, bool requires_grad = false) {
  FixtureTensor t;
  t.shape = std::move(shape);
  t.values = std::move(values);
  t.requires_grad = requires_grad;
  return t;
}

// out = x (the op under test is the identity), so d sum(out * w)/dx = w.
FixtureCase identity_case() {
  FixtureCase c;
  c.name = "identity_2x3";
  c.op = "identity";
  c.params = nlohmann::json::object();
  c.inputs = {f32_tensor({2, 3}, {1, 2, 3, 4, 5, 6}, true)};
  c.weights = {f32_tensor({2, 3}, {0.5, -1, 2, 0.25, 3, -2})};
  c.outputs = {f32_tensor({2, 3}, {1, 2, 3, 4, 5, 6})};
  c.grads = {f32_tensor({2, 3}, {0.5, -1, 2, 0.25, 3, -2})};
  return c;
}

const OpTable kIdentity = {
    {"identity", [](const Ins& x, const nlohmann::json&) { return Ins{x.at(0)}; }}};

TEST_CASE("fixture files parse with shapes, dtypes, views and per-input grads", "[reference]") {
  const auto file =
      testing::load_fixture_file(testing::fixture_path("tests/reference/fixtures/shape.json"));
  CHECK(file.family == "shape");
  REQUIRE(file.cases.size() > 20);
  bool saw_view = false, saw_index = false;
  for (const FixtureCase& c : file.cases) {
    REQUIRE(c.inputs.size() == c.grads.size());
    REQUIRE(c.outputs.size() == c.weights.size());
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      CHECK(int64_t(c.inputs[i].values.size()) == shape_numel(c.inputs[i].shape));
      if (!c.inputs[i].views.empty()) saw_view = true;
      if (c.inputs[i].dtype == DType::i64) {
        saw_index = true;
        CHECK(!c.grads[i].has_value());  // integer inputs have no gradient
      }
    }
  }
  CHECK(saw_view);
  CHECK(saw_index);
  const Tensor t = file.cases.front().inputs.front().to_tensor();
  CHECK(t.shape() == file.cases.front().inputs.front().shape);
  CHECK(t.requires_grad());
}

TEST_CASE("run_case passes a correct case and fails every kind of mismatch", "[reference]") {
  SECTION("correct") {
    const CaseReport r = run_case(identity_case(), kIdentity, {});
    CHECK(r.passed);
    CHECK(r.message.empty());
  }
  SECTION("unknown op") {
    FixtureCase c = identity_case();
    c.op = "no_such_op";
    const CaseReport r = run_case(c, kIdentity, {});
    CHECK_FALSE(r.passed);
    CHECK_THAT(r.message, Catch::Contains("no dispatch entry for op 'no_such_op'"));
  }
  SECTION("wrong value names the worst element") {
    FixtureCase c = identity_case();
    c.outputs[0].values[5] = 6.001;  // element (1, 2)
    const CaseReport r = run_case(c, kIdentity, {});
    CHECK_FALSE(r.passed);
    CHECK_THAT(r.message, Catch::Contains("output 0") && Catch::Contains("(1, 2)") &&
                              Catch::Contains("expected 6.001"));
  }
  SECTION("wrong gradient") {
    FixtureCase c = identity_case();
    c.grads[0]->values[0] = 0.6;
    const CaseReport r = run_case(c, kIdentity, {});
    CHECK_FALSE(r.passed);
    CHECK_THAT(r.message, Catch::Contains("grad of input 0") && Catch::Contains("(0, 0)"));
  }
  SECTION("wrong shape") {
    FixtureCase c = identity_case();
    c.outputs[0].shape = {3, 2};
    const CaseReport r = run_case(c, kIdentity, {});
    CHECK_FALSE(r.passed);
    CHECK_THAT(r.message, Catch::Contains("expected shape (3, 2)"));
  }
  SECTION("an output that drops its history fails where a gradient is expected") {
    const OpTable detached = {
        {"identity", [](const Ins& x, const nlohmann::json&) { return Ins{x.at(0).detach()}; }}};
    const CaseReport r = run_case(identity_case(), detached, {});
    CHECK_FALSE(r.passed);
    CHECK_THAT(r.message, Catch::Contains("grad of input 0: no gradient reached it"));
  }
  SECTION("an exception is a failure, not a crash") {
    const OpTable throwing = {{"identity", [](const Ins&, const nlohmann::json&) -> Ins {
                                 throw std::runtime_error("[identity] broken");
                               }}};
    const CaseReport r = run_case(identity_case(), throwing, {});
    CHECK_FALSE(r.passed);
    CHECK_THAT(r.message, Catch::Contains("threw: [identity] broken"));
  }
  SECTION("within tolerance passes, just outside fails") {
    FixtureCase c = identity_case();
    c.outputs[0].values[1] = 2.0 + 0.5e-5 * 6;  // atol scales with max|expected| = 6
    CHECK(run_case(c, kIdentity, {}).passed);
    c.outputs[0].values[1] = 2.0 + 1e-4;
    CHECK_FALSE(run_case(c, kIdentity, {}).passed);
  }
}

}  // namespace
}  // namespace tessera::reference

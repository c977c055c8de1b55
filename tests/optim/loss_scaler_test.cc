// Dynamic loss scaling: scaled backward, unscaling, skip-and-backoff on inf/NaN, growth after clean
// steps, the min-scale floor, the found-inf reduction hook, and its state.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "autograd/ops.h"
#include "optim/optim.h"
#include "tests/testing/compare.h"

namespace {

using namespace tessera;
using nlohmann::json;

constexpr float kInf = std::numeric_limits<float>::infinity();

struct Fixture {
  Tensor w = zeros({3}).set_requires_grad(true);
  optim::SGD opt{std::vector<Tensor>{w}, optim::SgdOptions{.lr = 1.0}};
  // As backward would leave them under `scale`: true gradient g times the scale.
  void set_scaled_grad(const std::vector<float>& g, double scale) {
    std::vector<float> s;
    for (float v : g) s.push_back(float(v * scale));
    w.set_grad(from_vector(s, {3}));
  }
};

TEST_CASE("skipped steps back off, clean steps grow the scale", "[optim][scaler]") {
  Fixture f;
  optim::DynamicLossScaler scaler({.init_scale = 8.0, .growth_factor = 2.0, .backoff_factor = 0.5,
                                   .growth_interval = 3, .min_scale = 1.0});
  CHECK(scaler.scale() == 8.0);
  double expect_w = 0.0;
  for (int k = 0; k < 3; ++k) {
    f.set_scaled_grad({0.5f, 0.5f, 0.5f}, scaler.scale());
    CHECK(scaler.step(f.opt));
    expect_w -= 0.5;  // the optimizer saw the unscaled gradient
    testing::require_close(f.w, full({3}, expect_w), 0.0, 0.0);
  }
  CHECK(scaler.scale() == 16.0);  // grew after 3 clean steps
  CHECK(scaler.growth_tracker() == 0);

  f.set_scaled_grad({1.0f, kInf, 1.0f}, scaler.scale());
  CHECK_FALSE(scaler.step(f.opt));
  testing::require_close(f.w, full({3}, expect_w), 0.0, 0.0);  // untouched
  CHECK(scaler.scale() == 8.0);
  CHECK(scaler.skipped_steps() == 1);

  f.set_scaled_grad({std::nanf(""), 1.0f, 1.0f}, scaler.scale());
  CHECK_FALSE(scaler.step(f.opt));
  CHECK(scaler.scale() == 4.0);
  CHECK(scaler.skipped_steps() == 2);
  CHECK(f.opt.step_count(0) == 3);

  // Two clean steps, then an overflow: the tracker resets, so growth needs 3 clean steps again.
  for (int k = 0; k < 2; ++k) {
    f.set_scaled_grad({0.0f, 0.0f, 0.0f}, scaler.scale());
    CHECK(scaler.step(f.opt));
  }
  CHECK(scaler.growth_tracker() == 2);
  f.set_scaled_grad({kInf, 0.0f, 0.0f}, 1.0);
  CHECK_FALSE(scaler.step(f.opt));
  CHECK(scaler.growth_tracker() == 0);
  CHECK(scaler.scale() == 2.0);
  // The floor.
  for (int k = 0; k < 4; ++k) {
    f.set_scaled_grad({kInf, 0.0f, 0.0f}, 1.0);
    CHECK_FALSE(scaler.step(f.opt));
  }
  CHECK(scaler.scale() == 1.0);
  CHECK(scaler.skipped_steps() == 7);
}

TEST_CASE("scale_loss gives scaled gradients; unscale before clipping", "[optim][scaler]") {
  Tensor w = full({2}, 1.0).set_requires_grad(true);
  optim::SGD opt({w}, {.lr = 0.1});
  optim::DynamicLossScaler scaler;
  CHECK(scaler.scale() == 65536.0);
  Tensor loss = sum(mul(w, w));  // gradient 2w = 2
  autograd::backward({scaler.scale_loss(loss)});
  testing::require_close(w.grad(), full({2}, 2.0 * 65536.0), 0.0, 0.0);
  CHECK_FALSE(scaler.unscale(opt.params()));
  testing::require_close(w.grad(), full({2}, 2.0), 0.0, 0.0);
  CHECK_THROWS_AS(scaler.unscale(opt.params()), ValueError);  // once per step
  CHECK(optim::clip_grad_norm(opt.params(), 1.0) == Approx(std::sqrt(8.0)));
  CHECK(scaler.step(opt));  // does not unscale a second time
  const double g = 2.0 / (std::sqrt(8.0) + 1e-6);
  testing::require_close(w, full({2}, 1.0 - 0.1 * g), 1e-6, 0.0);
  // A 16-bit loss is widened before scaling: 65536 * 3 would overflow f16.
  Tensor l16 = full({}, 3.0, {.dtype = DType::f16});
  Tensor scaled = scaler.scale_loss(l16);
  CHECK(scaled.dtype() == DType::f32);
  CHECK(scaled.item() == 3.0 * 65536.0);
}

TEST_CASE("the found-inf reducer makes every rank skip together", "[optim][scaler]") {
  Fixture f;
  optim::DynamicLossScaler scaler({.init_scale = 4.0});
  bool other_rank_found_inf = true;
  int calls = 0;
  scaler.set_found_inf_reducer([&](bool local) {
    ++calls;
    CHECK_FALSE(local);
    return local || other_rank_found_inf;
  });
  f.set_scaled_grad({1.0f, 1.0f, 1.0f}, 4.0);
  CHECK_FALSE(scaler.step(f.opt));
  CHECK(calls == 1);
  CHECK(scaler.scale() == 2.0);
  testing::require_close(f.w, zeros({3}), 0.0, 0.0);
  other_rank_found_inf = false;
  f.set_scaled_grad({1.0f, 1.0f, 1.0f}, 2.0);
  CHECK(scaler.step(f.opt));
  testing::require_close(f.w, full({3}, -1.0), 0.0, 0.0);
}

TEST_CASE("loss scaler state round trip and errors", "[optim][scaler][errors]") {
  Fixture f;
  optim::DynamicLossScaler a({.init_scale = 1024.0, .growth_interval = 10});
  f.set_scaled_grad({kInf, 0.0f, 0.0f}, 1.0);
  a.step(f.opt);
  for (int k = 0; k < 4; ++k) {
    f.set_scaled_grad({0.0f, 0.0f, 0.0f}, 1.0);
    a.step(f.opt);
  }
  const json saved = json::parse(a.state_dict().dump());
  optim::DynamicLossScaler b({.init_scale = 1024.0, .growth_interval = 10});
  b.load_state_dict(saved);
  CHECK(b.scale() == 512.0);
  CHECK(b.growth_tracker() == 4);
  CHECK(b.skipped_steps() == 1);
  CHECK_THROWS_WITH(b.load_state_dict({{"scale", 2.0}, {"growth_tracker", 0}, {"skipped_steps", 0}, {"x", 1}}),
                    Catch::Contains("unknown key 'x'"));
  CHECK_THROWS_WITH(b.load_state_dict({{"scale", 2.0}}), Catch::Contains("expected 'scale', 'growth_tracker'"));
  CHECK_THROWS_WITH(b.load_state_dict({{"scale", -2.0}, {"growth_tracker", 0}, {"skipped_steps", 0}}),
                    Catch::Contains("expected scale > 0"));
  CHECK(b.scale() == 512.0);
  CHECK_THROWS_WITH(optim::DynamicLossScaler({.backoff_factor = 1.5}), Catch::Contains("backoff_factor in (0, 1)"));
  CHECK_THROWS_WITH(optim::DynamicLossScaler({.growth_interval = 0}), Catch::Contains("growth_interval >= 1"));
  CHECK_THROWS_WITH(optim::DynamicLossScaler({.init_scale = 0.5, .min_scale = 1.0}),
                    Catch::Contains("min_scale <= init_scale"));
}

}  // namespace

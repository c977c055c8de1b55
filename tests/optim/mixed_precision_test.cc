// f32 master weights: masters and their rounding back into bf16 / f16 models, gradient transfer,
// bf16 training of a linear regression that ends close to the f32 run, and f16 training with the
// dynamic loss scaler skipping an overflowing step.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "autograd/ops.h"
#include "optim/optim.h"
#include "tests/testing/compare.h"

namespace {

using namespace tessera;

TEST_CASE("masters are f32 copies; f32 parameters are their own masters", "[optim][mixed]") {
  Generator gen(5);
  Tensor a = randn({4, 3}, {.dtype = DType::bf16}, &gen).set_requires_grad(true);
  Tensor b = randn({3}, {}, &gen).set_requires_grad(true);
  Tensor c = randn({2}, {.dtype = DType::f16}, &gen).set_requires_grad(true);
  optim::MasterWeights mw({a, b, c});
  REQUIRE(mw.masters().size() == 3);
  CHECK(mw.masters()[0].dtype() == DType::f32);
  CHECK(mw.masters()[1].is_same(b));
  CHECK(mw.masters()[2].dtype() == DType::f32);
  testing::require_close(mw.masters()[0], a.to(DType::f32), 0.0, 0.0);
  testing::require_close(mw.masters()[2], c.to(DType::f32), 0.0, 0.0);

  // Gradients: converted to f32; undefined stays undefined.
  a.set_grad(full({4, 3}, 0.25, {.dtype = DType::bf16}));
  mw.grads_to_master();
  CHECK(mw.masters()[0].grad().dtype() == DType::f32);
  testing::require_close(mw.masters()[0].grad(), full({4, 3}, 0.25), 0.0, 0.0);
  CHECK_FALSE(mw.masters()[2].grad().defined());
  mw.zero_grad();
  CHECK_FALSE(a.grad().defined());
  CHECK_FALSE(mw.masters()[0].grad().defined());

  // Refresh rounds to nearest even: 1 + 2^-8 is a bf16 tie between 1 and 1 + 2^-7 (odd), so even
  // gives 1; 1 + 3 * 2^-8 ties between 1 + 2^-7 (odd) and 1 + 2^-6 (even).
  mw.masters()[0].fill_(1.0 + std::ldexp(1.0, -8));
  mw.masters()[2].fill_(1.0 / 3.0);
  const uint64_t version = a.version();
  mw.master_to_model();
  CHECK(a.version() > version);
  CHECK(a.data<BFloat16>()[0].bits == BFloat16(1.0f).bits);
  mw.masters()[0].fill_(1.0 + 3.0 * std::ldexp(1.0, -8));
  mw.master_to_model();
  CHECK(float(a.data<BFloat16>()[5]) == float(1.0 + std::ldexp(1.0, -6)));
  CHECK(c.data<Half>()[1].bits == Half(1.0f / 3.0f).bits);
}

TEST_CASE("master_groups maps each group onto the masters", "[optim][mixed]") {
  Tensor w = zeros({2, 2}, {.dtype = DType::bf16}).set_requires_grad(true);
  Tensor bias = zeros({2}, {.dtype = DType::bf16}).set_requires_grad(true);
  optim::MasterWeights mw({w, bias});
  auto groups = mw.master_groups(optim::param_groups_with_decay({{"w", w}, {"bias", bias}}, 0.1));
  REQUIRE(groups.size() == 2);
  REQUIRE(groups[0].params.size() == 1);
  CHECK(groups[0].params[0].is_same(mw.masters()[0]));
  CHECK(groups[1].params[0].is_same(mw.masters()[1]));
  CHECK(groups[0].weight_decay == 0.1);
  Tensor stranger = zeros({2});
  CHECK_THROWS_WITH(mw.master_groups({optim::ParamGroup{.params = {stranger}}}),
                    Catch::Contains("not one of them"));
}

// y = X w* + b* over 256 samples of 8 features, fitted with AdamW (no decay) for `steps` steps in
// `dtype` (through f32 masters when 16-bit). Returns the final f32 loss and the learned weights.
struct Fit {
  double loss;
  std::vector<double> w;
};

Fit fit_regression(DType dtype, int steps, bool f16_scaler = false, int overflow_step = -1) {
  Generator gen(42);
  Tensor x = randn({256, 8}, {}, &gen);
  Tensor w_true = randn({1, 8}, {}, &gen);
  Tensor y = add(linear(x, w_true), 0.5);  // (256, 1)
  Tensor w = zeros({1, 8}, {.dtype = dtype}).set_requires_grad(true);
  Tensor b = zeros({1}, {.dtype = dtype}).set_requires_grad(true);
  optim::MasterWeights mw({w, b});
  optim::AdamW opt(mw.masters(), {.lr = 0.05, .weight_decay = 0.0});
  optim::DynamicLossScaler scaler({.init_scale = 1024.0, .growth_interval = 10});
  const Tensor xd = x.to(dtype);
  double loss_value = 0.0;
  for (int k = 0; k < steps; ++k) {
    Tensor pred = to_dtype(linear(xd, w, b), DType::f32);  // compute in dtype, loss in f32
    Tensor loss = mean(square(sub(pred, y)));
    loss_value = loss.item();
    autograd::backward({f16_scaler ? scaler.scale_loss(loss) : loss});
    if (k == overflow_step) w.grad().fill_(std::numeric_limits<double>::infinity());
    mw.grads_to_master();
    if (f16_scaler) {
      const double scale_before = scaler.scale();
      const Tensor master_before = mw.masters()[0].clone();
      const bool stepped = scaler.step(opt);
      // Besides the injected one, real overflows happen: the scale grows until 2 * residual * x * scale
      // exceeds f16's 65504, and the scaler backs off.
      if (k == overflow_step) CHECK_FALSE(stepped);
      if (!stepped) {
        CHECK(scaler.scale() == scale_before / 2);
        testing::require_close(mw.masters()[0], master_before, 0.0, 0.0);
      }
    } else {
      opt.step();
    }
    mw.master_to_model();
    mw.zero_grad();
  }
  if (f16_scaler) {
    INFO("skipped " << scaler.skipped_steps() << ", final scale " << scaler.scale());
    CHECK(scaler.skipped_steps() >= 1);
    CHECK(scaler.skipped_steps() <= steps / 10);
    CHECK(scaler.scale() > 1024.0);  // it grew as the gradients shrank
  }
  Fit fit{loss_value, testing::to_doubles(mw.masters()[0])};
  return fit;
}

TEST_CASE("bf16 training with f32 masters converges close to the f32 run", "[optim][mixed]") {
  const Fit f32 = fit_regression(DType::f32, 300);
  const Fit bf16 = fit_regression(DType::bf16, 300);
  INFO("f32 loss " << f32.loss << ", bf16 loss " << bf16.loss);
  // Targets have variance about 8; f32 fits them almost exactly, bf16 up to its rounding of
  // inputs and outputs (relative 2^-9).
  CHECK(f32.loss < 1e-6);
  CHECK(bf16.loss < 1e-3);
  for (size_t i = 0; i < f32.w.size(); ++i) CHECK(std::abs(bf16.w[i] - f32.w[i]) < 5e-3);
}

TEST_CASE("f16 training with loss scaling skips the overflowing step and still converges", "[optim][mixed]") {
  const Fit f32 = fit_regression(DType::f32, 300);
  const Fit f16 = fit_regression(DType::f16, 300, /*f16_scaler=*/true, /*overflow_step=*/40);
  INFO("f16 loss " << f16.loss);
  CHECK(f16.loss < 1e-3);
  for (size_t i = 0; i < f32.w.size(); ++i) CHECK(std::abs(f16.w[i] - f32.w[i]) < 5e-3);
}

}  // namespace

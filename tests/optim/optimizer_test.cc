// Optimizer basics: decay / no-decay grouping, zero_grad, skipped parameters, no autograd history
// from a step, 16-bit parameters, and option validation (lr < 0, unknown keys and types).
#include <catch2/catch.hpp>
#include <thread>

#include "autograd/ops.h"
#include "core/parallel.h"
#include "optim/optim.h"
#include "tests/testing/compare.h"

namespace {

using namespace tessera;
using nlohmann::json;

template <typename Fn>
void require_error(Fn&& fn, const std::string& needle) {
  try {
    fn();
    FAIL("expected an error containing '" << needle << "'");
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(std::string(e.what()).find(needle) != std::string::npos);
  }
}

TEST_CASE("param_groups_with_decay keeps biases, norms and 1-D tensors out of decay", "[optim]") {
  optim::NamedTensors named = {
      {"wte.weight", zeros({10, 4})},       {"h.0.attn.c_attn.weight", zeros({4, 12})},
      {"h.0.attn.c_attn.bias", zeros({12})}, {"h.0.ln_1.weight", zeros({4})},
      {"ln_f.weight", zeros({4})},          {"encoder.layer_norm.table", zeros({4, 4})},
      {"head.bias_table", zeros({3, 3})},   {"ln.scale", zeros({2, 2})},
      {"blnx.weight", zeros({4, 4})},       {"scalar_gain", zeros({})},
  };
  auto groups = optim::param_groups_with_decay(named, 0.1);
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].weight_decay == 0.1);
  CHECK(groups[1].weight_decay == 0.0);
  CHECK_FALSE(groups[0].lr.has_value());
  auto holds = [&](size_t g, const std::string& name) {
    for (const auto& [n, t] : named)
      if (n == name)
        for (const Tensor& p : groups[g].params)
          if (p.is_same(t)) return true;
    return false;
  };
  for (const char* n : {"wte.weight", "h.0.attn.c_attn.weight", "blnx.weight"}) {
    INFO(n);
    CHECK(holds(0, n));
  }
  for (const char* n : {"h.0.attn.c_attn.bias", "h.0.ln_1.weight", "ln_f.weight", "encoder.layer_norm.table",
                        "head.bias_table", "ln.scale", "scalar_gain"}) {
    INFO(n);
    CHECK(holds(1, n));
  }
  CHECK(groups[0].params.size() + groups[1].params.size() == named.size());
  // The groups feed an optimizer directly; the no-decay group really does not decay.
  std::vector<Tensor> ps = {ones({2, 2}).set_requires_grad(true), ones({2}).set_requires_grad(true)};
  optim::AdamW opt(optim::param_groups_with_decay({{"w", ps[0]}, {"b", ps[1]}}, 0.5), {.lr = 0.1});
  for (const Tensor& p : ps) p.set_grad(zeros(p.shape()));
  opt.step();  // zero gradients: only the decay moves anything
  testing::require_close(ps[0], full({2, 2}, 1.0 - 0.1 * 0.5));
  testing::require_close(ps[1], ones({2}));
}

TEST_CASE("step skips parameters without a gradient and zero_grad clears them", "[optim]") {
  Tensor a = full({3}, 1.0).set_requires_grad(true), b = full({2}, 2.0).set_requires_grad(true);
  optim::SGD opt({a, b}, {.lr = 0.5});
  a.set_grad(full({3}, 1.0));
  const uint64_t version_a = a.version(), version_b = b.version();
  opt.step();
  testing::require_close(a, full({3}, 0.5));
  testing::require_close(b, full({2}, 2.0));
  CHECK(opt.step_count(0) == 1);
  CHECK(opt.step_count(1) == 0);
  CHECK(a.version() > version_a);  // in-place updates are visible to saved-tensor checks
  CHECK(b.version() == version_b);
  opt.zero_grad();
  CHECK_FALSE(a.grad().defined());
  CHECK_FALSE(b.grad().defined());
}

TEST_CASE("a step records no autograd history and restores grad mode", "[optim]") {
  Tensor w = full({2, 2}, 1.0).set_requires_grad(true);
  optim::Adam opt({w}, {.lr = 0.1});
  Tensor loss = sum(mul(w, w));
  autograd::backward({loss});
  REQUIRE(w.grad().defined());
  REQUIRE(autograd::is_grad_enabled());
  opt.step();
  CHECK(autograd::is_grad_enabled());
  CHECK(w.is_leaf());
  CHECK(w.requires_grad());
  // Adam's first step moves every element by lr (m / sqrt(v) = sign(g)).
  testing::require_close(w, full({2, 2}, 0.9), 1e-6, 1e-6);
}

TEST_CASE("16-bit parameters are updated in f32 and rounded to nearest even", "[optim]") {
  Generator gen(3);
  Tensor w = randn({37}, {.dtype = DType::bf16}, &gen).set_requires_grad(true);
  Tensor g = randn({37}, {.dtype = DType::bf16}, &gen);
  Tensor w32 = w.to(DType::f32);
  const Tensor g32 = g.to(DType::f32);
  std::vector<float> expect(37);
  for (int64_t i = 0; i < 37; ++i) expect[i] = w32.data<float>()[i] - 0.3f * g32.data<float>()[i];
  optim::SGD opt({w}, {.lr = 0.3});
  w.set_grad(g);
  opt.step();
  REQUIRE(w.dtype() == DType::bf16);
  const BFloat16* got = w.data<BFloat16>();
  for (int64_t i = 0; i < 37; ++i) {
    INFO("element " << i);
    CHECK(got[i].bits == BFloat16(expect[i]).bits);
  }
}

TEST_CASE("non-contiguous parameters: loop optimizers write back, Adam refuses", "[optim]") {
  Tensor base = zeros({3, 2});
  Tensor w = base.transpose(0, 1);  // (2, 3), strides (1, 2)
  w.set_requires_grad(true);
  w.set_grad(ones({2, 3}));
  optim::SGD sgd({w}, {.lr = 1.0});
  sgd.step();
  testing::require_close(base, full({3, 2}, -1.0));
  optim::Adam adam({w});
  require_error([&] { adam.step(); }, "expected a contiguous parameter");
}

TEST_CASE("invalid options and configurations are errors naming the value", "[optim][errors]") {
  std::vector<Tensor> ps = {zeros({2}).set_requires_grad(true)};
  require_error([&] { optim::SGD(ps, {.lr = -0.1}); }, "[sgd] expected lr >= 0, got -0.1");
  require_error([&] { optim::AdamW(ps, {.lr = -1.0}); }, "[adamw] expected lr >= 0, got -1");
  require_error([&] { optim::Adam(ps, {.beta2 = 1.0}); }, "expected betas in [0, 1)");
  require_error([&] { optim::SGD(ps, {.lr = 0.1, .nesterov = true}); }, "expected momentum > 0");
  require_error([&] { optim::Lamb(ps, {.eps = -1.0}); }, "expected eps >= 0");
  require_error([&] { optim::Lars(ps, {.trust_coefficient = 0.0}); }, "expected trust_coefficient > 0");
  optim::SGD ok(ps, {.lr = 0.1});
  require_error([&] { ok.set_lr(-0.5); }, "expected lr >= 0, got -0.5");
  CHECK(ok.lr() == 0.1);
  require_error([&] { optim::SGD({optim::ParamGroup{.params = {ps[0], ps[0]}}}); }, "one group only");
  require_error([&] { optim::SGD({zeros({2}, {.dtype = DType::i64})}); }, "expected floating parameters");
  // A group override that is invalid is caught too.
  require_error(
      [&] { optim::SGD({optim::ParamGroup{.params = ps, .lr = -2.0}}); }, "expected lr >= 0, got -2");

  require_error([&] { optim::make_optimizer({{"type", "adamw"}, {"lr", 1e-3}, {"beta1", 0.9}}, {{ps}}); },
                "[adamw] expected keys lr, betas, eps, weight_decay, got unknown key 'beta1'");
  require_error([&] { optim::make_optimizer({{"type", "adagrad"}}, {{ps}}); }, "got 'adagrad'");
  require_error([&] { optim::make_optimizer({{"lr", 0.1}}, {{ps}}); }, "string 'type'");
  require_error([&] { optim::make_optimizer({{"type", "sgd"}, {"lr", "fast"}}, {{ps}}); },
                "expected a number for 'lr', got \"fast\"");
  require_error([&] { optim::make_optimizer({{"type", "lamb"}, {"betas", {0.9}}}, {{ps}}); },
                "expected 'betas' as [beta1, beta2]");
  auto opt = optim::make_optimizer({{"type", "lars"}, {"lr", 0.2}, {"exclude_1d", true}}, {{ps}});
  CHECK(std::string(opt->type()) == "lars");
  CHECK(opt->lr() == 0.2);
}

TEST_CASE("a gradient of the wrong shape is an error naming the parameter", "[optim][errors]") {
  Tensor w = zeros({2, 3}).set_requires_grad(true);
  optim::SGD opt({w});
  w.impl()->autograd_meta().grad = zeros({3, 2});  // bypasses set_grad's own check
  require_error([&] { opt.step(); }, "expected a floating gradient like the parameter (2, 3) f32 cpu");
}

}  // namespace

namespace {

using namespace tessera;

// Three steps of `config` over a 200k-element parameter with `threads` CPU threads.
std::vector<double> run_with_threads(const nlohmann::json& config, int threads) {
  const int before = num_threads();
  set_num_threads(threads);
  Generator gen(9);
  Tensor w = randn({400, 500}, {}, &gen).set_requires_grad(true);
  auto opt = optim::make_optimizer(config, {optim::ParamGroup{.params = {w}}});
  for (int k = 0; k < 3; ++k) {
    w.set_grad(randn({400, 500}, {}, &gen));
    opt->step();
  }
  set_num_threads(before);
  return testing::to_doubles(w);
}

TEST_CASE("large updates give the same bits with 1 and 2 threads", "[optim]") {
  for (const char* type : {"sgd", "adamw", "lamb", "lars"}) {
    INFO(type);
    nlohmann::json config = {{"type", type}, {"lr", 0.01}};
    if (std::string(type) == "sgd") config["momentum"] = 0.9;
    CHECK(run_with_threads(config, 1) == run_with_threads(config, 2));
  }
}

}  // namespace

// ZeRO's overlapped step updates a shard range by range as its gradients are reduced; every
// element must get the numbers a whole step gives it, on every step, from disjoint threads too.
TEST_CASE("a step in slices equals the whole step for sgd, adam and adamw", "[optim]") {
  const std::vector<json> configs = {
      {{"type", "sgd"}, {"lr", 0.1}, {"momentum", 0.9}, {"weight_decay", 0.01}},
      {{"type", "adam"}, {"lr", 1e-2}, {"weight_decay", 0.01}},
      {{"type", "adamw"}, {"lr", 1e-2}, {"weight_decay", 0.1}}};
  for (const json& config : configs) {
    INFO(config.dump());
    Generator gen(7);
    Tensor whole = randn({1000}, {}, &gen).set_requires_grad(true);
    Tensor sliced = whole.detach().clone().set_requires_grad(true);
    auto a = optim::make_optimizer(config, {{.params = {whole}}});
    auto b = optim::make_optimizer(config, {{.params = {sliced}}});
    REQUIRE(b->elementwise());
    for (int step = 0; step < 3; ++step) {
      const Tensor grad = randn({1000}, {}, &gen);
      whole.set_grad(grad.clone());
      a->step();
      b->begin_sliced_step(0);
      // Out of order, the middle slice on another thread.
      std::thread middle([&] { b->step_slice(0, 300, grad.narrow(0, 300, 450)); });
      b->step_slice(0, 750, grad.narrow(0, 750, 250));
      b->step_slice(0, 0, grad.narrow(0, 0, 300));
      middle.join();
      REQUIRE(b->step_count(0) == a->step_count(0));
      const std::vector<double> want = testing::to_doubles(whole), got = testing::to_doubles(sliced);
      REQUIRE(got == want);
    }
  }
  Tensor w = zeros({4}).set_requires_grad(true);
  auto lamb = optim::make_optimizer({{"type", "lamb"}}, {{.params = {w}}});
  CHECK_FALSE(lamb->elementwise());
  require_error([&] { lamb->begin_sliced_step(0); }, "element-wise");
  auto adam = optim::make_optimizer({{"type", "adam"}}, {{.params = {w}}});
  require_error([&] { adam->step_slice(0, 0, zeros({4})); }, "begin_sliced_step");
  adam->begin_sliced_step(0);
  require_error([&] { adam->step_slice(0, 2, zeros({4})); }, "expected a slice");
}

// Optimizer state: bit-exact resume through state_dict / load_state_dict for every optimizer, and
// the errors of a mismatched load.
#include <catch2/catch.hpp>

#include <cstring>
#include <nlohmann/json.hpp>

#include "core/factory.h"
#include "optim/optim.h"

namespace {

using namespace tessera;
using nlohmann::json;

std::vector<Tensor> make_params() {
  Generator gen(7);
  return {randn({5, 4}, {}, &gen).set_requires_grad(true), randn({4}, {}, &gen).set_requires_grad(true),
          randn({3, 2, 2}, {}, &gen).set_requires_grad(true)};
}

std::vector<Tensor> clone_params(const std::vector<Tensor>& ps) {
  std::vector<Tensor> out;
  for (const Tensor& p : ps) out.push_back(p.clone().set_requires_grad(true));
  return out;
}

// Step k's gradients, the same for every run; parameter 1 has none at step 0 so step counts differ.
void set_grads(const std::vector<Tensor>& ps, int k) {
  Generator gen(100 + uint64_t(k));
  for (size_t i = 0; i < ps.size(); ++i)
    ps[i].set_grad(k == 0 && i == 1 ? Tensor() : randn(ps[i].shape(), {}, &gen));
}

std::vector<optim::ParamGroup> groups_of(const std::vector<Tensor>& ps) {
  return {optim::ParamGroup{.params = {ps[0], ps[2]}},
          optim::ParamGroup{.params = {ps[1]}, .lr = std::nullopt, .weight_decay = 0.0}};
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), size_t(a.numel()) * a.itemsize()) == 0;
}

const std::vector<json> kConfigs = {
    {{"type", "sgd"}, {"lr", 0.1}, {"momentum", 0.9}, {"nesterov", true}, {"weight_decay", 0.01}},
    {{"type", "adam"}, {"lr", 0.01}, {"weight_decay", 0.1}},
    {{"type", "adamw"}, {"lr", 0.01}, {"betas", {0.9, 0.95}}},
    {{"type", "lamb"}, {"lr", 0.01}},
    {{"type", "lars"}, {"lr", 0.5}, {"weight_decay", 1e-4}},
};

TEST_CASE("resume after state_dict / load_state_dict is bit-exact", "[optim][state]") {
  for (const json& config : kConfigs) {
    INFO(config.dump());
    const std::vector<Tensor> start = make_params();
    // Uninterrupted: 6 steps.
    std::vector<Tensor> full = clone_params(start);
    auto opt_full = optim::make_optimizer(config, groups_of(full));
    for (int k = 0; k < 6; ++k) {
      set_grads(full, k);
      opt_full->step();
    }
    // 3 steps, save (through JSON text, as a checkpoint would), new optimizer, load, 3 steps.
    std::vector<Tensor> first = clone_params(start);
    auto opt_first = optim::make_optimizer(config, groups_of(first));
    for (int k = 0; k < 3; ++k) {
      set_grads(first, k);
      opt_first->step();
    }
    optim::OptimizerState saved = opt_first->state_dict();
    saved.meta = json::parse(saved.meta.dump());
    for (auto& [name, t] : saved.tensors) t = t.clone();
    CHECK(saved.meta["state"]["2"]["step"] == 2);  // params[1], the only one in group 1
    CHECK(saved.meta["state"]["0"]["step"] == 3);

    std::vector<Tensor> resumed = clone_params(first);
    json other = config;
    other["lr"] = 0.5 * config["lr"].get<double>();  // the loaded options must win
    auto opt_resumed = optim::make_optimizer(other, groups_of(resumed));
    opt_resumed->load_state_dict(saved);
    CHECK(opt_resumed->lr(0) == config["lr"].get<double>());
    CHECK(opt_resumed->step_count(2) == 2);  // flat index 2 is params[1] (group 1)
    for (int k = 3; k < 6; ++k) {
      set_grads(resumed, k);
      opt_resumed->step();
    }
    for (size_t i = 0; i < start.size(); ++i) {
      INFO("param " << i);
      CHECK(same_bits(resumed[i], full[i]));
      CHECK_FALSE(same_bits(resumed[i], start[i]));
    }
  }
}

// A state dict of an AdamW over make_params() after one step.
optim::OptimizerState adamw_state() {
  std::vector<Tensor> ps = make_params();
  optim::AdamW opt(groups_of(ps), {.lr = 0.01});
  set_grads(ps, 1);
  opt.step();
  return opt.state_dict();
}

void require_load_error(optim::Optimizer& opt, const optim::OptimizerState& sd, const std::string& needle) {
  const double lr_before = opt.lr(0);
  try {
    opt.load_state_dict(sd);
    FAIL("expected an error containing '" << needle << "'");
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(std::string(e.what()).find(needle) != std::string::npos);
  }
  CHECK(opt.lr(0) == lr_before);  // a failed load changes nothing
}

TEST_CASE("load_state_dict names the mismatching entry", "[optim][state][errors]") {
  std::vector<Tensor> ps = make_params();
  optim::AdamW opt(groups_of(ps), {.lr = 0.003});
  const optim::OptimizerState good = adamw_state();
  REQUIRE(good.tensors.size() == 6);
  REQUIRE(good.tensors[0].first == "state.0.exp_avg");

  SECTION("the good one loads") {
    opt.load_state_dict(good);
    CHECK(opt.lr(0) == 0.01);
    CHECK(opt.step_count(0) == 1);
  }
  SECTION("type") {
    optim::SGD sgd(groups_of(ps));
    require_load_error(sgd, good, "expected optimizer type 'sgd', got \"adamw\"");
  }
  SECTION("group count") {
    optim::AdamW one(ps);
    require_load_error(one, good, "expected 1 param_groups, got 2");
  }
  SECTION("parameters per group") {
    optim::AdamW other({optim::ParamGroup{.params = {ps[0]}}, optim::ParamGroup{.params = {ps[1], ps[2]}}});
    require_load_error(other, good, "param_groups[0].params [0]");
  }
  SECTION("shape") {
    std::vector<Tensor> wrong = {zeros({5, 3}).set_requires_grad(true), ps[1], ps[2]};
    optim::AdamW other(groups_of(wrong));
    require_load_error(other, good, "'state.0.exp_avg' of shape (5, 3) f32, got (5, 4) f32");
  }
  SECTION("dtype") {
    optim::OptimizerState bad = good;
    bad.tensors[3].second = bad.tensors[3].second.to(DType::bf16);
    require_load_error(opt, bad, "'" + good.tensors[3].first + "' of shape");
  }
  SECTION("missing tensor") {
    optim::OptimizerState bad = good;
    bad.tensors.erase(bad.tensors.begin() + 1);
    require_load_error(opt, bad, "expected tensor 'state.0.exp_avg_sq', got none");
  }
  SECTION("extra tensor") {
    optim::OptimizerState bad = good;
    bad.tensors.emplace_back("state.0.max_exp_avg_sq", zeros({5, 4}));
    require_load_error(opt, bad, "unexpected tensor 'state.0.max_exp_avg_sq'");
  }
  SECTION("state for a parameter that does not exist") {
    optim::OptimizerState bad = good;
    bad.meta["state"]["7"] = {{"step", 1}};
    require_load_error(opt, bad, "got entry '7'");
  }
  SECTION("unknown option key") {
    optim::OptimizerState bad = good;
    bad.meta["param_groups"][1]["amsgrad"] = false;
    require_load_error(opt, bad, "unknown key 'amsgrad'");
  }
  SECTION("invalid option value") {
    optim::OptimizerState bad = good;
    bad.meta["param_groups"][0]["lr"] = -1.0;
    require_load_error(opt, bad, "expected lr >= 0, got -1");
  }
  SECTION("bad step count") {
    optim::OptimizerState bad = good;
    bad.meta["state"]["0"]["step"] = 0;
    require_load_error(opt, bad, "state.0 as {\"step\": n > 0}");
  }
}

TEST_CASE("SGD without momentum keeps no state tensors; with momentum it restores them", "[optim][state]") {
  std::vector<Tensor> ps = make_params();
  optim::SGD plain(ps, {.lr = 0.1});
  set_grads(ps, 1);
  plain.step();
  CHECK(plain.state_dict().tensors.empty());
  // Loading a momentum-free state into a momentum SGD adopts the saved options (no buffers needed).
  optim::SGD momentum(ps, {.lr = 0.1, .momentum = 0.9});
  momentum.load_state_dict(plain.state_dict());
  CHECK(momentum.options(0).momentum == 0.0);
}

}  // namespace

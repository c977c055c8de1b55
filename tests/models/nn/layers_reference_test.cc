// Every models/nn layer against PyTorch: the fixture's parameters are loaded by name with
// load_state_dict, then the output and the gradients of sum(out * w) with respect to every float
// input and every parameter are compared at rtol 1e-4, atol 1e-5 (the reference is float64 from
// float32-exact values, so this measures Tessera's own float32 error).
#include <catch2/catch.hpp>
#include <functional>

#include "autograd/ops.h"
#include "models/nn/nn.h"
#include "tests/testing/compare.h"
#include "tests/testing/fixtures.h"

namespace tessera::nn {
namespace {

using testing::FixtureCase;
using testing::require_close;

constexpr double kRtol = 1e-4;
constexpr double kAtol = 1e-5;

const std::vector<FixtureCase>& cases() {
  static const std::vector<FixtureCase> all =
      testing::load_fixture_file(testing::fixture_path("tests/models/nn/fixtures/nn_modules.json"))
          .cases;
  return all;
}

struct Built {
  std::shared_ptr<Module> module;
  std::function<Tensor(const std::vector<Tensor>&)> forward;
};

Tensor input_or_none(const std::vector<Tensor>& in, size_t i) {
  return i < in.size() ? in[i] : Tensor();
}

// The Tessera layer for a case, built through the factories (weights are then overwritten).
Built build(const FixtureCase& c, bool checkpoint = false) {
  Generator gen(7);
  const auto& p = c.params;
  auto i64 = [&](const char* key) { return p.at(key).get<int64_t>(); };
  if (c.op == "linear") {
    auto m = make_linear(
        {.in_features = i64("in"), .out_features = i64("out"), .bias = p.at("bias").get<bool>()},
        gen);
    return {m, [m](const std::vector<Tensor>& in) { return m->forward(in[0]); }};
  }
  if (c.op == "layer_norm") {
    auto m = make_layer_norm({.dim = i64("dim"), .eps = p.at("eps").get<double>()});
    return {m, [m](const std::vector<Tensor>& in) { return m->forward(in[0]); }};
  }
  if (c.op == "embedding") {
    auto m = make_embedding({.num_embeddings = i64("num"), .dim = i64("dim")}, gen,
                            ParallelStyle::vocab);
    return {m, [m](const std::vector<Tensor>& in) { return m->forward(in[0]); }};
  }
  if (c.op == "attention") {
    auto m = make_attention({.d_model = i64("d_model"),
                             .n_heads = i64("n_heads"),
                             .causal = p.at("causal").get<bool>()},
                            gen);
    return {m,
            [m](const std::vector<Tensor>& in) { return m->forward(in[0], input_or_none(in, 1)); }};
  }
  if (c.op == "mlp") {
    auto m = make_mlp({.d_model = i64("d_model"),
                       .hidden = i64("hidden"),
                       .gelu = p.at("gelu").get<std::string>()},
                      gen);
    return {m, [m](const std::vector<Tensor>& in) { return m->forward(in[0]); }};
  }
  if (c.op == "block") {
    auto m = make_block({.d_model = i64("d_model"),
                         .n_heads = i64("n_heads"),
                         .causal = p.at("causal").get<bool>(),
                         .pre_ln = p.at("pre_ln").get<bool>(),
                         .gelu = p.at("gelu").get<std::string>(),
                         .checkpoint = checkpoint},
                        gen);
    return {m,
            [m](const std::vector<Tensor>& in) { return m->forward(in[0], input_or_none(in, 1)); }};
  }
  if (c.op == "patch_embedding") {
    auto m = make_patch_embedding({.image_height = i64("height"),
                                   .image_width = i64("width"),
                                   .patch_size = i64("patch"),
                                   .in_channels = i64("in_channels"),
                                   .embed_dim = i64("dim")},
                                  gen);
    return {m, [m](const std::vector<Tensor>& in) { return m->forward(in[0]); }};
  }
  if (c.op == "classification_head") {
    const std::string pool = p.at("pooling").get<std::string>();
    const Pooling pooling = pool == "cls"    ? Pooling::cls
                            : pool == "mean" ? Pooling::mean
                                             : Pooling::none;
    auto m = make_classification_head({.d_model = i64("d_model"),
                                       .num_classes = i64("classes"),
                                       .pooling = pooling,
                                       .norm = p.at("norm").get<bool>()},
                                      gen);
    return {m, [m](const std::vector<Tensor>& in) { return m->forward(in[0]); }};
  }
  FAIL("unknown fixture op " << c.op);
  return {};
}

struct Run {
  Tensor out;
  std::vector<Tensor> input_grads;  // per forward input (undefined for ids and masks)
  NamedTensors param_grads;         // in named_parameters order
};

// Loads the case's parameters by name, runs forward and backward of sum(out * w).
Run run(const FixtureCase& c, const Built& b) {
  const size_t n = c.params.at("n_inputs").get<size_t>();
  const auto names = c.params.at("param_names").get<std::vector<std::string>>();
  REQUIRE(c.inputs.size() == n + names.size());
  StateDict entries;
  for (size_t i = 0; i < names.size(); ++i)
    entries.emplace_back(names[i], c.inputs[n + i].to_tensor().detach());
  b.module->load_state_dict(entries);  // strict: the names must be exactly the module's

  // Parameter names and order match PyTorch's module.
  std::vector<std::string> own;
  for (auto& [name, t] : b.module->named_parameters()) own.push_back(name);
  REQUIRE(own == names);

  std::vector<Tensor> inputs;
  for (size_t i = 0; i < n; ++i) inputs.push_back(c.inputs[i].to_tensor());
  Run r;
  r.out = b.forward(inputs);
  autograd::backward({sum(r.out * c.weights[0].to_tensor())});
  for (const Tensor& t : inputs) r.input_grads.push_back(t.requires_grad() ? t.grad() : Tensor());
  for (auto& [name, t] : b.module->named_parameters()) r.param_grads.emplace_back(name, t.grad());
  return r;
}

void check_against_fixture(const FixtureCase& c, const Run& r) {
  INFO("case " << c.name);
  require_close(r.out, c.outputs[0].to_tensor(), kRtol, kAtol);
  const size_t n = r.input_grads.size();
  for (size_t i = 0; i < n; ++i) {
    INFO("input " << i);
    REQUIRE(r.input_grads[i].defined() == c.grads[i].has_value());
    if (c.grads[i]) require_close(r.input_grads[i], c.grads[i]->to_tensor(), kRtol, kAtol);
  }
  for (size_t i = 0; i < r.param_grads.size(); ++i) {
    INFO("parameter " << r.param_grads[i].first);
    REQUIRE(r.param_grads[i].second.defined());
    require_close(r.param_grads[i].second, c.grads[n + i]->to_tensor(), kRtol, kAtol);
  }
}

void check_op(const std::string& op) {
  int count = 0;
  for (const FixtureCase& c : cases()) {
    if (c.op != op) continue;
    ++count;
    check_against_fixture(c, run(c, build(c)));
  }
  REQUIRE(count > 0);
}

TEST_CASE("Linear matches PyTorch", "[nn][reference]") { check_op("linear"); }
TEST_CASE("LayerNorm matches PyTorch", "[nn][reference]") { check_op("layer_norm"); }
TEST_CASE("Embedding matches PyTorch, repeated ids accumulate", "[nn][reference]") {
  check_op("embedding");
}
TEST_CASE("MultiHeadAttention (causal and padding-masked) matches PyTorch", "[nn][reference]") {
  check_op("attention");
}
TEST_CASE("MLP (tanh and erf GELU) matches PyTorch", "[nn][reference]") { check_op("mlp"); }
TEST_CASE("Block (pre-LN and post-LN) matches PyTorch", "[nn][reference]") { check_op("block"); }
TEST_CASE("PatchEmbedding matches a PyTorch Conv2d with stride = kernel", "[nn][reference]") {
  check_op("patch_embedding");
}
TEST_CASE("ClassificationHead (cls, mean, no pooling) matches PyTorch", "[nn][reference]") {
  check_op("classification_head");
}

TEST_CASE("Activation checkpointing gives the same output and gradients", "[nn][checkpoint]") {
  int count = 0;
  for (const FixtureCase& c : cases()) {
    if (c.op != "block") continue;
    ++count;
    INFO("case " << c.name);
    Run plain = run(c, build(c, false));
    Run ckpt = run(c, build(c, true));
    check_against_fixture(c, ckpt);
    // Same kernels on the same values: identical, not merely close.
    require_close(ckpt.out, plain.out, 0.0, 0.0);
    for (size_t i = 0; i < plain.input_grads.size(); ++i)
      if (plain.input_grads[i].defined())
        require_close(ckpt.input_grads[i], plain.input_grads[i], 0.0, 0.0);
    REQUIRE(ckpt.param_grads.size() == plain.param_grads.size());
    for (size_t i = 0; i < plain.param_grads.size(); ++i) {
      INFO("parameter " << plain.param_grads[i].first);
      require_close(ckpt.param_grads[i].second, plain.param_grads[i].second, 0.0, 0.0);
    }
  }
  REQUIRE(count == 3);
}

}  // namespace
}  // namespace tessera::nn

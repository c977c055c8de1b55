// Module bookkeeping: registration rules, dotted names, buffers, train/eval, in-place dtype moves,
// state_dict / load_state_dict (round trip and every error), zero_grad and weight tying.
#include <catch2/catch.hpp>

#include "autograd/ops.h"
#include "models/nn/nn.h"
#include "tests/testing/compare.h"

namespace tessera::nn {
namespace {

using testing::require_close;
using testing::to_doubles;

// A two-block GPT-like stack: wte, h.0, h.1, ln_f, lm_head tied to wte, and a step buffer.
struct TinyLM : Module {
  std::shared_ptr<Embedding> wte;
  std::shared_ptr<ModuleList> h;
  std::shared_ptr<LayerNorm> ln_f;
  std::shared_ptr<LMHead> lm_head;
  Tensor steps;

  TinyLM(uint64_t seed, int64_t vocab = 11, int64_t c = 8) {
    Generator gen(seed);
    steps = register_buffer("steps", zeros({1}, {.dtype = DType::i64}));
    wte = register_module(
        "wte", make_embedding({.num_embeddings = vocab, .dim = c}, gen, ParallelStyle::vocab));
    h = register_module("h", std::make_shared<ModuleList>());
    for (int i = 0; i < 2; ++i)
      h->push_back(
          make_block({.d_model = c, .n_heads = 2, .causal = true, .residual_layers = 2}, gen));
    ln_f = register_module("ln_f", make_layer_norm({.dim = c}));
    lm_head = register_module("lm_head", make_tied_lm_head({.d_model = c, .vocab_size = vocab},
                                                           wte->weight(), ParallelStyle::vocab));
  }
  std::string type_name() const override { return "TinyLM"; }
  Tensor forward(const Tensor& ids) {  // (B, T) -> (B, T, V)
    Tensor x = wte->forward(ids);
    for (size_t i = 0; i < h->size(); ++i) x = h->at<Block>(i)->forward(x);
    return lm_head->forward(ln_f->forward(x));
  }
};

std::vector<std::string> names_of(const NamedTensors& entries) {
  std::vector<std::string> out;
  for (const auto& e : entries) out.push_back(e.first);
  return out;
}

Tensor ids_2x4() { return from_vector<int64_t>({1, 4, 4, 9, 0, 10, 3, 2}, {2, 4}); }

TEST_CASE("Parameters get dotted names in registration order; tied weights are listed once",
          "[nn][module]") {
  TinyLM m(1);
  const std::vector<std::string> names = names_of(m.named_parameters());
  const std::vector<std::string> block = {
      "ln_1.weight",        "ln_1.bias",        "attn.c_attn.weight", "attn.c_attn.bias",
      "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight",        "ln_2.bias",
      "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};
  std::vector<std::string> want = {"wte.weight"};
  for (const char* prefix : {"h.0.", "h.1."})
    for (const std::string& n : block) want.push_back(prefix + n);
  want.push_back("ln_f.weight");
  want.push_back("ln_f.bias");
  REQUIRE(names == want);  // lm_head.weight is wte.weight: listed once, under its first name
  REQUIRE(m.parameters().size() == want.size());

  // state_dict lists the shared tensor under both names (like PyTorch), plus the buffer.
  const std::vector<std::string> sd = names_of(m.state_dict());
  REQUIRE(sd.size() == want.size() + 2);
  REQUIRE(sd.front() == "steps");
  REQUIRE(sd.back() == "lm_head.weight");
  REQUIRE(m.lm_head->weight().is_same(m.wte->weight()));
  REQUIRE(m.lm_head->tied());

  // Per block 12 * C^2 + 13 * C = 872 at C = 8; the shared (11, 8) table counts once.
  REQUIRE(m.num_parameters() == 11 * 8 + 2 * 872 + 16);
  REQUIRE(m.children().size() == 4);
  REQUIRE(names_of(NamedTensors{}).empty());
  REQUIRE(m.named_children()[1].first == "h");
}

TEST_CASE("Registration rejects bad names and non-floating parameters", "[nn][module]") {
  Module m;
  m.register_parameter("w", zeros({2}));
  CHECK_THROWS_WITH(m.register_parameter("w", zeros({2})),
                    Catch::Contains("'w' which is already registered"));
  CHECK_THROWS_WITH(m.register_buffer("w", zeros({2})), Catch::Contains("already registered"));
  CHECK_THROWS_WITH(m.register_parameter("a.b", zeros({2})), Catch::Contains("without '.'"));
  CHECK_THROWS_WITH(m.register_parameter("", zeros({2})), Catch::Contains("non-empty"));
  CHECK_THROWS_WITH(m.register_parameter("ids", zeros({2}, {.dtype = DType::i64})),
                    Catch::Contains("floating leaf tensor for 'ids'"));
  Tensor leaf = ones({2}, {.requires_grad = true});
  CHECK_THROWS_WITH(m.register_parameter("nonleaf", leaf * 2.0), Catch::Contains("not a leaf"));
  CHECK_THROWS_WITH(m.register_module("w", std::make_shared<Module>()),
                    Catch::Contains("already registered"));
  Tensor frozen = m.register_parameter("frozen", zeros({3}), /*requires_grad=*/false);
  REQUIRE_FALSE(frozen.requires_grad());
  REQUIRE(m.parameters()[0].requires_grad());
}

TEST_CASE("Buffers: named_buffers lists all, state_dict only persistent ones", "[nn][module]") {
  Module m;
  auto child = m.register_module("child", std::make_shared<Module>());
  child->register_buffer("mask", ones({3}, {.dtype = DType::b8}));
  child->register_buffer("scratch", zeros({2}), /*persistent=*/false);
  m.register_parameter("w", ones({2}));
  REQUIRE(names_of(m.named_buffers()) == std::vector<std::string>{"child.mask", "child.scratch"});
  REQUIRE(names_of(m.state_dict()) == std::vector<std::string>{"w", "child.mask"});
  REQUIRE(m.num_parameters() == 2);
}

TEST_CASE("train() and eval() reach every descendant", "[nn][module]") {
  TinyLM m(1);
  REQUIRE(m.is_training());
  m.eval();
  REQUIRE_FALSE(m.is_training());
  REQUIRE_FALSE(m.h->at<Block>(1)->mlp()->is_training());
  REQUIRE_FALSE(m.h->at<Block>(0)->attn()->c_proj()->is_training());
  m.train();
  REQUIRE(m.h->at<Block>(1)->attn()->is_training());
}

TEST_CASE("to(DType) converts floating tensors in place and keeps parameter identity",
          "[nn][module]") {
  TinyLM m(3);
  const Tensor held = m.h->at<Block>(0)->attn()->c_attn()->weight();  // a handle kept elsewhere
  const std::vector<double> before = to_doubles(held);
  autograd::backward({sum(m.forward(ids_2x4()))});
  REQUIRE(held.grad().defined());

  m.to(DType::bf16);
  REQUIRE(held.dtype() == DType::bf16);
  REQUIRE(held.is_same(m.named_parameters()[1 + 2].second));
  REQUIRE(held.requires_grad());
  REQUIRE(held.is_leaf());
  REQUIRE(held.grad().dtype() == DType::bf16);
  REQUIRE(m.lm_head->weight().is_same(m.wte->weight()));  // still tied
  REQUIRE(m.wte->weight().dtype() == DType::bf16);
  REQUIRE(m.steps.dtype() == DType::i64);  // integer buffers untouched

  m.to(DType::f32);
  REQUIRE(held.dtype() == DType::f32);
  const std::vector<double> after = to_doubles(held);
  for (size_t i = 0; i < before.size(); ++i)
    REQUIRE(after[i] == Approx(before[i]).epsilon(1e-2).margin(1e-4));
  m.to(kCPU);  // already there: a no-op that keeps everything
  REQUIRE(held.device() == kCPU);
  CHECK_THROWS_WITH(m.to(DType::i32), Catch::Contains("expected a floating dtype"));
}

TEST_CASE("state_dict / load_state_dict round trip copies values in place",
          "[nn][module][state_dict]") {
  TinyLM a(1), b(2);
  Tensor ids = ids_2x4();
  const Tensor out_a = a.forward(ids);
  const Tensor held = b.h->at<Block>(1)->mlp()->c_fc()->weight();
  const uint64_t version = held.version();
  REQUIRE_FALSE(to_doubles(b.forward(ids)) == to_doubles(out_a));

  StateDict sd = a.state_dict();
  a.steps.fill_(42);
  LoadResult r = b.load_state_dict(sd);
  REQUIRE(r.missing_keys.empty());
  REQUIRE(r.unexpected_keys.empty());
  require_close(b.forward(ids), out_a, 0.0, 0.0);
  REQUIRE(held.is_same(b.h->at<Block>(1)->mlp()->c_fc()->weight()));  // identity kept
  REQUIRE(held.version() > version);
  REQUIRE(held.requires_grad());
  REQUIRE(b.steps.item() == 42);  // state_dict entries alias the module's storage
  REQUIRE(b.lm_head->weight().is_same(b.wte->weight()));

  // Loading its own state dict is harmless.
  b.load_state_dict(b.state_dict());
  require_close(b.forward(ids), out_a, 0.0, 0.0);
}

StateDict without(StateDict sd, const std::string& name) {
  std::erase_if(sd, [&](const auto& e) { return e.first == name; });
  return sd;
}

TEST_CASE("load_state_dict names missing and unexpected keys", "[nn][module][state_dict]") {
  TinyLM a(1), b(2);
  StateDict sd = without(a.state_dict(), "h.0.ln_2.bias");
  CHECK_THROWS_WITH(b.load_state_dict(sd), Catch::Contains("[load_state_dict]") &&
                                               Catch::Contains("missing keys: h.0.ln_2.bias") &&
                                               !Catch::Contains("unexpected"));
  sd.emplace_back("h.2.attn.c_attn.weight", zeros({24, 8}));
  sd.emplace_back("extra", zeros({1}));
  CHECK_THROWS_WITH(
      b.load_state_dict(sd),
      Catch::Contains(
          "missing keys: h.0.ln_2.bias; unexpected keys: h.2.attn.c_attn.weight, extra"));

  // Non-strict: loads what matches and reports the rest.
  const Tensor b_bias = b.h->at<Block>(0)->ln_2()->bias();
  const std::vector<double> kept = to_doubles(b_bias);
  LoadResult r = b.load_state_dict(sd, /*strict=*/false);
  REQUIRE(r.missing_keys == std::vector<std::string>{"h.0.ln_2.bias"});
  REQUIRE(r.unexpected_keys == std::vector<std::string>{"h.2.attn.c_attn.weight", "extra"});
  REQUIRE(to_doubles(b_bias) == kept);
  require_close(b.h->at<Block>(1)->attn()->c_attn()->weight(),
                a.h->at<Block>(1)->attn()->c_attn()->weight(), 0, 0);

  StateDict dup = a.state_dict();
  dup.push_back(dup.front());
  CHECK_THROWS_WITH(b.load_state_dict(dup),
                    Catch::Contains("expected each key once, got 'steps' twice"));
}

TEST_CASE("load_state_dict names the tensor on a shape or dtype mismatch and writes nothing",
          "[nn][module][state_dict]") {
  TinyLM a(1), b(2);
  const std::vector<double> b_wte = to_doubles(b.wte->weight());
  StateDict sd = a.state_dict();
  for (auto& [name, t] : sd)
    if (name == "h.1.attn.c_attn.weight") t = zeros({8, 24});
  CHECK_THROWS_WITH(
      b.load_state_dict(sd),
      Catch::Contains("expected 'h.1.attn.c_attn.weight' of shape (24, 8), got shape (8, 24)"));
  // wte.weight comes before the bad entry and was still not written.
  REQUIRE(to_doubles(b.wte->weight()) == b_wte);

  sd = a.state_dict();
  for (auto& [name, t] : sd)
    if (name == "ln_f.weight") t = t.to(DType::bf16);
  CHECK_THROWS_WITH(b.load_state_dict(sd),
                    Catch::Contains("expected 'ln_f.weight' of dtype f32, got dtype bf16"));
  REQUIRE(to_doubles(b.wte->weight()) == b_wte);
}

TEST_CASE("zero_grad drops or zeroes gradients", "[nn][module]") {
  TinyLM m(5);
  autograd::backward({sum(m.forward(ids_2x4()))});
  for (const Tensor& p : m.parameters()) REQUIRE(p.grad().defined());
  m.zero_grad(/*set_to_none=*/false);
  for (const Tensor& p : m.parameters()) {
    REQUIRE(p.grad().defined());
    for (double v : to_doubles(p.grad())) REQUIRE(v == 0.0);
  }
  m.zero_grad();
  for (const Tensor& p : m.parameters()) REQUIRE_FALSE(p.grad().defined());
}

TEST_CASE("A tied weight is one tensor whose gradient sums both uses", "[nn][module][tying]") {
  Generator gen(9);
  auto wte = make_embedding({.num_embeddings = 6, .dim = 4}, gen, ParallelStyle::vocab);
  auto head =
      make_tied_lm_head({.d_model = 4, .vocab_size = 6}, wte->weight(), ParallelStyle::vocab);
  REQUIRE(head->weight().is_same(wte->weight()));
  Tensor ids = from_vector<int64_t>({0, 3, 3, 5}, {4});
  Tensor w = randn({4, 6}, {}, &gen);
  autograd::backward({sum(head->forward(wte->forward(ids)) * w)});
  const Tensor tied_grad = wte->weight().grad();

  // The same computation with two untied copies: their gradients must add up to the tied one.
  Tensor e = wte->weight().detach().clone().set_requires_grad(true);
  Tensor h = wte->weight().detach().clone().set_requires_grad(true);
  autograd::backward({sum(linear(embedding(e, ids), h) * w)});
  require_close(tied_grad, e.grad() + h.grad(), 1e-6, 1e-7);
  REQUIRE(to_doubles(e.grad()) != to_doubles(tied_grad));  // both paths contribute

  CHECK_THROWS_WITH(make_tied_lm_head({.d_model = 4, .vocab_size = 7}, wte->weight()),
                    Catch::Contains("expected a tied weight of shape (7, 4), got (6, 4)"));
}

}  // namespace
}  // namespace tessera::nn

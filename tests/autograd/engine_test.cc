// The backward engine: graph shapes, accumulation, retain_graph, errors, grad mode, hooks, the
// version counter, autograd::grad, higher-order gradients and always-run (collective) nodes.
#include <catch2/catch.hpp>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "tests/testing/compare.h"
#include "tests/testing/gradcheck.h"

using namespace tessera;
using tessera::testing::require_close;
using tessera::testing::to_doubles;

namespace {
Tensor leaf(std::vector<float> v, Shape shape) {
  Tensor t = from_vector(v, shape);
  t.set_requires_grad(true);
  return t;
}
}  // namespace

TEST_CASE("engine: diamond graph sums both paths", "[autograd][engine]") {
  Tensor x = leaf({1, 2, 3}, {3});
  Tensor a = mul(x, 2.0);         // 2x
  Tensor b = square(x);           // x^2
  Tensor y = sum(add(mul(a, b), a));  // 2x^3 + 2x
  autograd::backward({y});
  // dy/dx = 6x^2 + 2
  require_close(x.grad(), from_vector({8, 26, 56}, {3}), 1e-6, 1e-6);
}

TEST_CASE("engine: gradients accumulate into leaves across backwards", "[autograd][engine]") {
  Tensor x = leaf({1, -2}, {2});
  for (int i = 0; i < 2; ++i) {
    Tensor y = sum(mul(x, x));
    autograd::backward({y});
  }
  require_close(x.grad(), from_vector({4, -8}, {2}), 0, 0);
}

TEST_CASE("engine: the leaf gradient is a fresh tensor, not the incoming one", "[autograd][engine]") {
  Tensor x = leaf({1, 2}, {2});
  Tensor g = from_vector({5, 6}, {2});
  autograd::backward({add(x, 1.0)}, {g});  // add passes g through unchanged
  REQUIRE(x.grad().storage() != g.storage());
  g.fill_(0.0);
  require_close(x.grad(), from_vector({5, 6}, {2}), 0, 0);
}

TEST_CASE("engine: a gradient reaching two leaves is never shared between them", "[autograd][engine]") {
  // add's backward hands the same tensor to both inputs: the first leaf copies it (another
  // pending edge still holds it), the second may take it as it is; either way they stay apart.
  Tensor x = leaf({1, 2}, {2});
  Tensor w = leaf({3, 4}, {2});
  autograd::backward({sum(mul(add(x, w), 2.0))});
  REQUIRE(x.grad().storage() != w.grad().storage());
  x.grad().fill_(0.0);
  require_close(w.grad(), from_vector({2, 2}, {2}), 0, 0);
  // A fresh gradient (nothing else holds it) is taken without a copy and is still the right one.
  Tensor z = leaf({1, 2, 3}, {3});
  autograd::backward({sum(mul(z, z))});
  require_close(z.grad(), from_vector({2, 4, 6}, {3}), 0, 0);
}

TEST_CASE("engine: retain_graph allows a second backward; without it the second one fails", "[autograd][engine]") {
  Tensor x = leaf({3}, {1});
  Tensor y = sum(mul(x, x));
  autograd::backward({y}, {}, {.retain_graph = true});
  autograd::backward({y});
  require_close(x.grad(), from_vector({12}, {1}), 0, 0);
  REQUIRE_THROWS_WITH(autograd::backward({y}), Catch::Contains("backward through the graph a second time") &&
                                                  Catch::Contains("retain_graph"));
}

TEST_CASE("engine: non-scalar roots need a gradient of their shape", "[autograd][engine]") {
  Tensor x = leaf({1, 2, 3, 4}, {2, 2});
  Tensor y = mul(x, 3.0);
  REQUIRE_THROWS_WITH(autograd::backward({y}), Catch::Contains("[backward]") &&
                                                  Catch::Contains("non-scalar root 0 of shape (2, 2)"));
  REQUIRE_THROWS_WITH(autograd::backward({y}, {ones({3})}),
                      Catch::Contains("expected the gradient of root 0 to have shape (2, 2), got (3)"));
  autograd::backward({y}, {ones({2, 2})});
  require_close(x.grad(), full({2, 2}, 3.0), 0, 0);
}

TEST_CASE("engine: a root without history is refused", "[autograd][engine]") {
  Tensor x = from_vector({1, 2}, {2});
  REQUIRE_THROWS_WITH(autograd::backward({sum(x)}), Catch::Contains("expected root 0 to require grad"));
}

TEST_CASE("engine: no_grad records nothing and detach cuts history", "[autograd][engine]") {
  Tensor x = leaf({1, 2}, {2});
  {
    autograd::NoGradGuard no_grad;
    Tensor y = mul(x, x);
    REQUIRE_FALSE(y.requires_grad());
    REQUIRE(y.grad_fn() == nullptr);
    {
      autograd::EnableGradGuard on;
      REQUIRE(mul(x, x).requires_grad());
    }
  }
  REQUIRE(autograd::is_grad_enabled());
  Tensor d = mul(x, 2.0).detach();
  REQUIRE_FALSE(d.requires_grad());
  REQUIRE(d.is_leaf());
  // Only the path through x (not through the detached copy) contributes.
  autograd::backward({sum(mul(x, d))});
  require_close(x.grad(), from_vector({2, 4}, {2}), 0, 0);
}

TEST_CASE("engine: grad-ready hooks fire once per backward, late leaves first", "[autograd][engine]") {
  Tensor x = from_vector({0.5f, -1.0f}, {2});
  Tensor w1 = leaf({1, 2}, {2});
  Tensor w2 = leaf({3, 4}, {2});
  Tensor w3 = leaf({5, 6}, {2});
  std::vector<std::string> order;
  std::vector<std::vector<double>> seen;
  for (auto [w, name] : {std::pair{w1, "w1"}, {w2, "w2"}, {w3, "w3"}}) {
    w.add_grad_ready_hook([&order, &seen, name = std::string(name)](const Tensor& t) {
      order.push_back(name);
      seen.push_back(to_doubles(t.grad()));
    });
  }
  // w1 is used twice (first and last layer): its hook must wait for both contributions.
  Tensor h = mul(x, w1);
  h = tanh(mul(h, w2));
  h = mul(h, w3);
  h = mul(h, w1);
  autograd::backward({sum(h)});
  REQUIRE(order == std::vector<std::string>{"w3", "w2", "w1"});
  // The hook saw the complete gradient.
  REQUIRE(seen[2] == to_doubles(w1.grad()));
}

TEST_CASE("engine: an in-place change to a saved tensor is reported", "[autograd][engine]") {
  Tensor x = leaf({1, 2}, {2});
  Tensor a = mul(x, 2.0);
  Tensor y = sum(mul(a, a));  // saves a
  add_(a, ones({2}));
  REQUIRE_THROWS_WITH(autograd::backward({y}), Catch::Contains("[mul]") &&
                                                  Catch::Contains("a tensor saved for backward was modified in place") &&
                                                  Catch::Contains("saved at version 0") &&
                                                  Catch::Contains("now at version 1"));
}

TEST_CASE("engine: in-place ops record history and refuse leaves", "[autograd][engine]") {
  Tensor x = leaf({1, 2}, {2});
  Tensor w = leaf({3, 4}, {2});
  REQUIRE_THROWS_WITH(add_(x, ones({2})), Catch::Contains("[add_]") && Catch::Contains("leaf that requires grad"));
  Tensor a = mul(x, 1.0);
  uint64_t v = a.version();
  add_(a, w, 2.0);  // a = x + 2w
  mul_(a, 3.0);     // a = 3x + 6w
  REQUIRE(a.version() == v + 2);
  autograd::backward({sum(a)});
  require_close(x.grad(), full({2}, 3.0), 0, 0);
  require_close(w.grad(), full({2}, 6.0), 0, 0);
  {
    autograd::NoGradGuard no_grad;
    add_(x, ones({2}));  // an optimizer step is allowed
  }
  require_close(x, from_vector({2, 3}, {2}), 0, 0);
}

TEST_CASE("engine: autograd::grad leaves .grad untouched", "[autograd][engine]") {
  Tensor x = leaf({1, 2}, {2});
  Tensor y = leaf({3}, {1});
  Tensor mid = mul(x, y);
  Tensor z = sum(square(mid));
  std::vector<Tensor> g = autograd::grad({z}, {x, mid});
  REQUIRE_FALSE(x.grad().defined());
  REQUIRE_FALSE(y.grad().defined());
  // dz/dx = 2 x y^2, dz/dmid = 2 mid
  require_close(g[0], from_vector({18, 36}, {2}), 1e-6, 0);
  require_close(g[1], from_vector({6, 12}, {2}), 1e-6, 0);
  // An input the root does not depend on gets an undefined gradient.
  Tensor unused = leaf({1}, {1});
  REQUIRE_FALSE(autograd::grad({sum(mul(x, 2.0))}, {unused})[0].defined());
}

TEST_CASE("engine: create_graph gives the second and third derivative of x^3", "[autograd][engine]") {
  Tensor x = leaf({2, -1}, {2});
  Tensor y = sum(pow(x, 3.0));
  Tensor dx = autograd::grad({y}, {x}, {}, {.create_graph = true})[0];
  require_close(dx, from_vector({12, 3}, {2}), 1e-6, 0);  // 3x^2
  REQUIRE(dx.requires_grad());
  Tensor d2 = autograd::grad({sum(dx)}, {x}, {}, {.create_graph = true})[0];
  require_close(d2, from_vector({12, -6}, {2}), 1e-6, 0);  // 6x
  Tensor d3 = autograd::grad({sum(d2)}, {x})[0];
  require_close(d3, from_vector({6, 6}, {2}), 1e-6, 0);
  // Through backward() too: x.grad keeps its graph.
  Tensor z = leaf({3}, {1});
  autograd::backward({sum(pow(z, 3.0))}, {}, {.create_graph = true});
  Tensor gz = z.grad();
  REQUIRE(gz.requires_grad());
  require_close(autograd::grad({sum(gz)}, {z})[0], from_vector({18}, {1}), 1e-6, 0);
  // z.grad holds a graph that refers back to z (a cycle, as in PyTorch): break it.
  z.set_grad(Tensor());
}

TEST_CASE("engine: second derivatives of activations under create_graph", "[autograd][engine]") {
  Tensor x = leaf({-1.3f, -0.2f, 0.4f, 1.7f}, {4});
  // d2/dx2 of tanh is -2 t (1 - t^2); of sigmoid s (1 - s)(1 - 2s).
  Tensor dt = autograd::grad({sum(tanh(x))}, {x}, {}, {.create_graph = true})[0];
  Tensor d2t = autograd::grad({sum(dt)}, {x})[0];
  Tensor t = tanh(x).detach();
  require_close(d2t, mul(mul(t, -2.0), 1.0 - square(t)), 1e-5, 1e-6);
  Tensor ds = autograd::grad({sum(sigmoid(x))}, {x}, {}, {.create_graph = true})[0];
  Tensor d2s = autograd::grad({sum(ds)}, {x})[0];
  Tensor s = sigmoid(x).detach();
  require_close(d2s, mul(mul(s, 1.0 - s), 1.0 - mul(s, 2.0)), 1e-5, 1e-6);
}

TEST_CASE("engine: multiple roots and a leaf root", "[autograd][engine]") {
  Tensor x = leaf({1, 2}, {2});
  Tensor a = sum(mul(x, 2.0));
  Tensor b = sum(mul(x, x));
  autograd::backward({a, b, x}, {Tensor(), scalar_tensor(0.5), ones({2})});
  // 2 + 0.5 * 2x + 1
  require_close(x.grad(), from_vector({4, 5}, {2}), 0, 0);
}

TEST_CASE("engine: nodes run in creation order among ready ones", "[autograd][engine]") {
  // Two independent branches: the later-created branch's node must run first.
  Tensor x = leaf({1}, {1});
  Tensor y = leaf({1}, {1});
  std::vector<std::string> order;
  x.add_grad_ready_hook([&](const Tensor&) { order.push_back("x"); });
  y.add_grad_ready_hook([&](const Tensor&) { order.push_back("y"); });
  Tensor a = exp(x);
  Tensor b = exp(y);
  autograd::backward({add(sum(a), sum(b))});
  REQUIRE(order == std::vector<std::string>{"y", "x"});
}

namespace {
// y = 2x with a deliberately wrong backward (3g), to prove the checker catches it.
struct WrongBackward final : autograd::Node {
  std::string name() const override { return "WrongBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override { return {mul(grads[0], 3.0)}; }
};
Tensor wrong_double(const Tensor& x) {
  Tensor out = x.detach().clone();
  {
    autograd::NoGradGuard no_grad;
    out = mul(x, 2.0);
  }
  if (auto node = autograd::make_node<WrongBackward>({&x})) autograd::set_history(out, node);
  return out;
}
}  // namespace

TEST_CASE("gradcheck: passes correct gradients and names the worst element of wrong ones", "[autograd][gradcheck]") {
  Tensor x = leaf({0.5f, -1.0f, 2.0f, 0.25f}, {2, 2});
  auto good = tessera::testing::check_gradients([](const std::vector<Tensor>& in) { return mul(in[0], 2.0); }, {x});
  INFO(good.message);
  REQUIRE(good.ok);
  auto bad = tessera::testing::check_gradients([](const std::vector<Tensor>& in) { return wrong_double(in[0]); }, {x});
  REQUIRE_FALSE(bad.ok);
  CHECK_THAT(bad.message, Catch::Contains("input 0") && Catch::Contains("4 of 4 elements out of tolerance") &&
                              Catch::Contains("worst at (") && Catch::Contains("analytic") &&
                              Catch::Contains("numeric"));
}

namespace {
// y = x (as `out_dtype`, reshaped to `out_shape`), backward g back to x's dtype and shape. Counts
// its runs and keeps the gradient it saw, so a test can tell whether the engine ran it and with
// what. `always` makes it a collective-like node (Node::always_run).
struct ProbeNode final : autograd::Node {
  bool always = false;
  bool record = true;
  Shape in_shape;
  DType in_dtype = DType::f32;
  int runs = 0;
  Tensor seen;
  std::string name() const override { return "ProbeNode"; }
  bool always_run() const override { return always; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    ++runs;
    seen = grads[0];
    return {grads[0].to(in_dtype).reshape(in_shape)};
  }
};
Tensor probe(const Tensor& x, const std::shared_ptr<ProbeNode>& node, Shape out_shape,
             DType out_dtype) {
  Tensor out = x.detach().to(out_dtype).reshape(out_shape).clone();
  node->in_shape = x.shape();
  node->in_dtype = x.dtype();
  node->next_edges.push_back(autograd::gradient_edge(x));
  autograd::set_history(out, node);
  if (node->record) node->record_output(out);
  return out;
}

// Passes no gradient at all to its input, as a stage or head that does not use a tensor would.
struct DropGradNode final : autograd::Node {
  std::string name() const override { return "DropGradNode"; }
  std::vector<Tensor> apply(std::vector<Tensor>&&) override { return {Tensor()}; }
};
Tensor drop_grad(const Tensor& x) {
  Tensor out = x.detach().clone();
  if (auto node = autograd::make_node<DropGradNode>({&x})) autograd::set_history(out, node);
  return out;
}

// Two outputs (x and 2x), one gradient each; always runs.
struct TwoOutputNode final : autograd::Node {
  int runs = 0;
  std::vector<Tensor> seen;
  std::string name() const override { return "TwoOutputNode"; }
  uint32_t num_outputs() const override { return 2; }
  bool always_run() const override { return true; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    ++runs;
    seen = grads;
    return {add(grads[0], mul(grads[1], 2.0))};
  }
};
}  // namespace

TEST_CASE("engine: an always-run node no gradient reached still runs, with zeros", "[autograd][engine]") {
  for (bool always : {true, false}) {
    INFO("always_run " << always);
    Tensor x = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
    auto node = std::make_shared<ProbeNode>();
    node->always = always;
    Tensor y = probe(x, node, {3, 2}, DType::bf16);
    // y reaches the root, but no gradient flows back through it; x also feeds the loss directly.
    Tensor loss = add(sum(drop_grad(y)), sum(mul(x, 3.0)));
    autograd::backward({loss});
    if (always) {
      REQUIRE(node->runs == 1);
      REQUIRE(node->seen.defined());
      REQUIRE(node->seen.shape() == Shape{3, 2});
      REQUIRE(node->seen.dtype() == DType::bf16);
      require_close(node->seen.to(DType::f32), zeros({3, 2}), 0, 0);
    } else {
      REQUIRE(node->runs == 0);
    }
    require_close(x.grad(), full({2, 3}, 3.0), 0, 0);
  }
}

TEST_CASE("engine: an always-run node's zeros reach the leaves below it", "[autograd][engine]") {
  // Only through the always-run node: its leaf gets a zero gradient (and its hook fires) instead of
  // none, so every rank of a group sees the same set of gradients.
  Tensor w = leaf({1, 2}, {2});
  int hooks = 0;
  w.add_grad_ready_hook([&](const Tensor&) { ++hooks; });
  Tensor other = leaf({5}, {1});
  auto node = std::make_shared<ProbeNode>();
  node->always = true;
  Tensor y = probe(exp(w), node, {2}, DType::f32);
  autograd::backward({add(sum(drop_grad(y)), sum(other))});
  REQUIRE(node->runs == 1);
  REQUIRE(hooks == 1);
  REQUIRE(w.grad().defined());
  require_close(w.grad(), zeros({2}), 0, 0);
  // A plain node in the same place leaves the leaf without a gradient, as before.
  Tensor v = leaf({1, 2}, {2});
  auto plain = std::make_shared<ProbeNode>();
  Tensor z = probe(exp(v), plain, {2}, DType::f32);
  autograd::backward({add(sum(drop_grad(z)), sum(other))});
  REQUIRE(plain->runs == 0);
  REQUIRE_FALSE(v.grad().defined());
}

TEST_CASE("engine: an always-run node gets zeros for the outputs no gradient reached", "[autograd][engine]") {
  Tensor x = leaf({1, -2, 3}, {3});
  auto node = autograd::make_node<TwoOutputNode>({&x});
  REQUIRE(node);
  Tensor a = x.detach().clone();
  Tensor b = mul(x.detach(), 2.0);
  autograd::set_history(a, node, 0);
  node->record_output(a, 0);
  autograd::set_history(b, node, 1);
  node->record_output(b, 1);
  autograd::backward({sum(mul(b, b))});  // only output 1 is used
  REQUIRE(node->runs == 1);
  REQUIRE(node->seen.size() == 2);
  REQUIRE(node->seen[0].defined());
  require_close(node->seen[0], zeros({3}), 0, 0);
  require_close(node->seen[1], from_vector({4, -8, 12}, {3}), 0, 0);  // 2b
  require_close(x.grad(), from_vector({8, -16, 24}, {3}), 0, 0);        // d(4x^2)/dx
}

TEST_CASE("engine: an always-run node that did not record its output is an internal error", "[autograd][engine]") {
  Tensor x = leaf({1, 2}, {2});
  auto unrecorded = [&x] {
    auto node = std::make_shared<ProbeNode>();
    node->always = true;
    node->record = false;
    return probe(x, node, {2}, DType::f32);
  };
  REQUIRE_THROWS_AS(autograd::backward({add(sum(drop_grad(unrecorded())), sum(x))}), InternalError);
  REQUIRE_THROWS_WITH(autograd::backward({add(sum(drop_grad(unrecorded())), sum(x))}),
                      Catch::Contains("ProbeNode always runs") &&
                          Catch::Contains("output 0 was not recorded"));
  // With a gradient for every output nothing needs recording.
  x.set_grad(Tensor());
  autograd::backward({sum(unrecorded())});
  require_close(x.grad(), ones({2}), 0, 0);
}

TEST_CASE("engine: under grad() an always-run node runs only on a path to a requested input", "[autograd][engine]") {
  Tensor x = leaf({1, 2}, {2});
  Tensor w = leaf({4}, {1});
  auto node = std::make_shared<ProbeNode>();
  node->always = true;
  Tensor y = probe(x, node, {2}, DType::f32);
  Tensor loss = add(sum(drop_grad(y)), add(sum(mul(x, 3.0)), sum(mul(w, w))));
  // w's gradient does not pass through the node: it stays idle.
  std::vector<Tensor> gw = autograd::grad({loss}, {w}, {}, {.retain_graph = true});
  require_close(gw[0], from_vector({8}, {1}), 0, 0);
  REQUIRE(node->runs == 0);
  // x's does: the node runs (with zeros) although no gradient reached it.
  std::vector<Tensor> gx = autograd::grad({loss}, {x});
  require_close(gx[0], full({2}, 3.0), 0, 0);
  REQUIRE(node->runs == 1);
  REQUIRE_FALSE(x.grad().defined());
}

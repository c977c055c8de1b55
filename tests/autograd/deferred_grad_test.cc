// Deferred weight gradients (the B/W split of zero-bubble pipeline schedules): B gives the input
// gradients and leaves the weights alone, W gives exactly the plain backward's weight gradients and
// fires the grad-ready hooks; shared and tied weights, micro-batches, and the cases that must not
// defer (outside the scope, non-leaf weights, create_graph, grad(), checkpoint).
#include "autograd/deferred_grad.h"

#include <catch2/catch.hpp>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "tests/testing/compare.h"

using namespace tessera;
using autograd::DeferWeightGrads;
using autograd::WeightGradQueue;
using tessera::testing::require_close;

namespace {

Tensor rnd(const Shape& shape, uint64_t seed, bool requires_grad = false) {
  Generator gen(seed);
  return randn(shape, {.requires_grad = requires_grad}, &gen);
}

// linear -> gelu -> linear -> tanh -> matmul with a leaf weight; built afresh from fixed seeds, so
// two instances hold equal values and separate .grad().
struct Mlp {
  Tensor w1 = rnd({6, 4}, 1, true), b1 = rnd({6}, 2, true);
  Tensor w2 = rnd({5, 6}, 3, true), b2 = rnd({5}, 4, true);
  Tensor w3 = rnd({5, 3}, 5, true);  // (in, out), used via matmul

  std::vector<Tensor> weights() const { return {w1, b1, w2, b2, w3}; }
  Tensor loss(const Tensor& x) const {  // x (2, 3, 4): matmul takes its flattened-rows path
    Tensor h = gelu(linear(x, w1, b1));
    h = tanh(linear(h, w2, b2));
    Tensor out = matmul(h, w3);                // (2, 3, 3)
    return sum(mul(out, rnd({2, 3, 3}, 99)));  // a non-uniform output gradient
  }
};

Tensor input(uint64_t seed) { return rnd({2, 3, 4}, seed, true); }

void require_equal_grads(const std::vector<Tensor>& actual, const std::vector<Tensor>& expected) {
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    INFO("tensor " << i);
    REQUIRE(actual[i].grad().defined());
    // Same kernels on the same data in the same order: equal to the bit.
    require_close(actual[i].grad(), expected[i].grad(), 0, 0);
  }
}

}  // namespace

TEST_CASE("deferred: B gives the input gradient, W the plain backward's weight gradients",
          "[autograd][deferred]") {
  Mlp plain;
  Tensor x_plain = input(10);
  autograd::backward({plain.loss(x_plain)});

  Mlp m;
  Tensor x = input(10);
  WeightGradQueue queue;
  {
    DeferWeightGrads defer(queue);
    autograd::backward({m.loss(x)});
  }
  require_equal_grads({x}, {x_plain});
  for (const Tensor& w : m.weights()) REQUIRE_FALSE(w.grad().defined());
  REQUIRE(queue.size() == 5);  // w1, b1, w2, b2, w3: one piece each

  queue.run();
  REQUIRE(queue.empty());
  require_equal_grads(m.weights(), plain.weights());
}

TEST_CASE("deferred: the weights' grad-ready hooks fire once, in W, with the whole gradient",
          "[autograd][deferred]") {
  Mlp m;
  std::vector<int> fired(5, 0);
  std::vector<Tensor> seen(5);
  for (size_t i = 0; i < 5; ++i) {
    m.weights()[i].add_grad_ready_hook([&fired, &seen, i](const Tensor& t) {
      ++fired[i];
      seen[i] = t.grad().clone();
    });
  }
  WeightGradQueue queue;
  {
    DeferWeightGrads defer(queue);
    autograd::backward({m.loss(input(10))});
  }
  REQUIRE(fired == std::vector<int>(5, 0));
  queue.run();
  REQUIRE(fired == std::vector<int>(5, 1));
  for (size_t i = 0; i < 5; ++i) require_close(seen[i], m.weights()[i].grad(), 0, 0);
}

TEST_CASE("deferred: micro-batches accumulate like plain backwards", "[autograd][deferred]") {
  Mlp plain;
  autograd::backward({plain.loss(input(10))});
  autograd::backward({plain.loss(input(11))});
  autograd::backward({plain.loss(input(12))});

  SECTION("a plain backward, then a deferred one, then its W") {
    Mlp m;
    autograd::backward({m.loss(input(10))});
    autograd::backward({m.loss(input(11))});
    WeightGradQueue queue;
    {
      DeferWeightGrads defer(queue);
      autograd::backward({m.loss(input(12))});
    }
    queue.run();
    require_equal_grads(m.weights(), plain.weights());
  }
  SECTION("one queue per micro-batch, W in order after all the B") {
    Mlp m;
    std::vector<WeightGradQueue> queues(3);
    for (uint64_t i = 0; i < 3; ++i) {
      DeferWeightGrads defer(queues[i]);
      autograd::backward({m.loss(input(10 + i))});
    }
    for (const Tensor& w : m.weights()) REQUIRE_FALSE(w.grad().defined());
    for (WeightGradQueue& q : queues) q.run();
    require_equal_grads(m.weights(), plain.weights());
  }
  SECTION("two backwards into one queue: summed, hooks fire once") {
    Mlp m;
    int fired = 0;
    m.w1.add_grad_ready_hook([&fired](const Tensor&) { ++fired; });
    autograd::backward({m.loss(input(10))});
    REQUIRE(fired == 1);
    WeightGradQueue queue;
    {
      DeferWeightGrads defer(queue);
      autograd::backward({m.loss(input(11))});
      autograd::backward({m.loss(input(12))});
    }
    REQUIRE(queue.size() == 10);
    queue.run();
    REQUIRE(fired == 2);
    // The two deferred gradients are summed before they reach .grad(): rounding may differ.
    for (size_t i = 0; i < 5; ++i) require_close(m.weights()[i].grad(), plain.weights()[i].grad());
  }
}

TEST_CASE("deferred: a weight shared by two linears gets both pieces, summed",
          "[autograd][deferred]") {
  auto loss = [](const Tensor& x, const Tensor& w, const Tensor& b) {
    return sum(tanh(linear(tanh(linear(x, w, b)), w, b)));
  };
  Tensor w_plain = rnd({4, 4}, 1, true), b_plain = rnd({4}, 2, true);
  autograd::backward({loss(input(10), w_plain, b_plain)});

  Tensor w = rnd({4, 4}, 1, true), b = rnd({4}, 2, true);
  int fired = 0;
  w.add_grad_ready_hook([&fired](const Tensor&) { ++fired; });
  WeightGradQueue queue;
  {
    DeferWeightGrads defer(queue);
    autograd::backward({loss(input(10), w, b)});
  }
  REQUIRE(queue.size() == 4);
  REQUIRE(fired == 0);
  queue.run();
  REQUIRE(fired == 1);
  // The pieces are summed in the order the engine would have summed them.
  require_equal_grads({w, b}, {w_plain, b_plain});
}

TEST_CASE("deferred: a tied weight's immediate part waits for W too", "[autograd][deferred]") {
  // w goes to linear (deferred) and to mul (not deferrable): all of it must arrive in W, once.
  auto loss = [](const Tensor& x, const Tensor& w) {
    return add(sum(tanh(linear(x, w))), sum(mul(w, w)));
  };
  Tensor w_plain = rnd({4, 4}, 1, true);
  autograd::backward({loss(input(10), w_plain)});

  Tensor w = rnd({4, 4}, 1, true);
  int fired = 0;
  w.add_grad_ready_hook([&fired](const Tensor&) { ++fired; });
  WeightGradQueue queue;
  {
    DeferWeightGrads defer(queue);
    autograd::backward({loss(input(10), w)});
  }
  REQUIRE_FALSE(w.grad().defined());
  REQUIRE(fired == 0);
  queue.run();
  REQUIRE(fired == 1);
  require_close(w.grad(), w_plain.grad());
}

TEST_CASE("deferred: nothing is deferred outside the scope, under create_graph or in grad()",
          "[autograd][deferred]") {
  Mlp plain;
  autograd::backward({plain.loss(input(10))});
  WeightGradQueue queue;

  SECTION("after the scope ended") {
    { DeferWeightGrads defer(queue); }
    Mlp m;
    autograd::backward({m.loss(input(10))});
    REQUIRE(queue.empty());
    require_equal_grads(m.weights(), plain.weights());
  }
  SECTION("create_graph: the weight gradients belong to the recorded graph") {
    Mlp m;
    DeferWeightGrads defer(queue);
    const Tensor x = input(10);
    autograd::backward({m.loss(x)}, {}, {.create_graph = true});
    REQUIRE(queue.empty());
    for (size_t i = 0; i < 5; ++i) require_close(m.weights()[i].grad(), plain.weights()[i].grad());
    // A recorded gradient refers to its leaf through its graph (a cycle): drop them all, as
    // PyTorch users must after create_graph.
    for (const Tensor& w : m.weights()) w.set_grad(Tensor());
    x.set_grad(Tensor());
  }
  SECTION("grad() returns the weight gradients") {
    Mlp m;
    DeferWeightGrads defer(queue);
    std::vector<Tensor> g = autograd::grad({m.loss(input(10))}, m.weights());
    REQUIRE(queue.empty());
    for (size_t i = 0; i < 5; ++i) require_close(g[i], plain.weights()[i].grad(), 0, 0);
  }
}

TEST_CASE("deferred: a non-leaf weight is computed in B", "[autograd][deferred]") {
  // The gradient of a scaled or transposed weight flows on through mul or transpose in this same
  // backward, so it cannot wait.
  auto loss = [](const Tensor& x, const Tensor& w1, const Tensor& w2) {
    Tensor h = tanh(linear(x, mul(w1, 0.5)));
    return sum(tanh(matmul(h, transpose(w2, 0, 1))));
  };
  Tensor w1_plain = rnd({5, 4}, 1, true), w2_plain = rnd({3, 5}, 2, true);
  autograd::backward({loss(input(10), w1_plain, w2_plain)});

  Tensor w1 = rnd({5, 4}, 1, true), w2 = rnd({3, 5}, 2, true);
  WeightGradQueue queue;
  {
    DeferWeightGrads defer(queue);
    autograd::backward({loss(input(10), w1, w2)});
  }
  REQUIRE(queue.empty());
  require_equal_grads({w1, w2}, {w1_plain, w2_plain});
}

TEST_CASE("deferred: checkpoint's inputs get their gradients in B", "[autograd][deferred]") {
  auto fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{tanh(linear(in[0], in[1]))};
  };
  Tensor x_plain = input(10), w_plain = rnd({5, 4}, 1, true);
  autograd::backward({sum(checkpoint(fn, {x_plain, w_plain})[0])});

  Tensor x = input(10), w = rnd({5, 4}, 1, true);
  WeightGradQueue queue;
  {
    DeferWeightGrads defer(queue);
    autograd::backward({sum(checkpoint(fn, {x, w})[0])});
  }
  REQUIRE(queue.empty());
  require_equal_grads({x, w}, {x_plain, w_plain});
}

TEST_CASE("deferred: W reports a saved tensor modified in place since B", "[autograd][deferred]") {
  Tensor w = rnd({5, 4}, 1, true);
  Tensor x = rnd({3, 4}, 2);
  WeightGradQueue queue;
  {
    DeferWeightGrads defer(queue);
    autograd::backward({sum(linear(x, w))});
  }
  add_(x, ones({3, 4}));
  REQUIRE_THROWS_WITH(queue.run(),
                      Catch::Contains("[linear]") && Catch::Contains("modified in place"));
  REQUIRE(queue.empty());
  REQUIRE_FALSE(w.grad().defined());
}

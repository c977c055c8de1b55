// Activation checkpointing: same outputs and gradients as running the segment directly (dropout
// included), fewer live bytes after the forward, and parameters captured by the segment get grads.
#include <catch2/catch.hpp>

#include "autograd/ops.h"
#include "core/allocator.h"
#include "tests/testing/compare.h"

using namespace tessera;
using tessera::testing::require_close;

namespace {

struct Mlp {
  Tensor w1, b1, w2, b2;
  explicit Mlp(int64_t in, int64_t hidden) {
    Generator gen(3);
    w1 = mul(randn({hidden, in}, {}, &gen), 0.1).set_requires_grad(true);
    b1 = mul(randn({hidden}, {}, &gen), 0.1).set_requires_grad(true);
    w2 = mul(randn({in, hidden}, {}, &gen), 0.1).set_requires_grad(true);
    b2 = mul(randn({in}, {}, &gen), 0.1).set_requires_grad(true);
  }
  std::vector<Tensor> params() const { return {w1, b1, w2, b2}; }
  // x (N, in) -> (N, in): linear, gelu, dropout, linear, tanh.
  std::vector<Tensor> operator()(const std::vector<Tensor>& in) const {
    Tensor h = gelu(linear(in[0], w1, b1));
    h = dropout(h, 0.25, /*training=*/true);
    return {tanh(linear(h, w2, b2))};
  }
  void zero_grads() const {
    for (const Tensor& p : params()) p.set_grad(Tensor());
  }
};

}  // namespace

TEST_CASE("checkpoint: same outputs and gradients as the plain segment, dropout included", "[autograd][checkpoint]") {
  Mlp mlp(8, 16);
  Tensor x = randn({5, 8}).set_requires_grad(true);
  auto run = [&](bool ckpt) {
    manual_seed(42);
    Tensor out = ckpt ? checkpoint(std::cref(mlp), {x})[0] : mlp({x})[0];
    uint64_t offset_after_forward = default_generator().offset();
    autograd::backward({sum(square(out))});
    // The recompute replays the dropout draw without moving the stream on.
    CHECK(default_generator().offset() == offset_after_forward);
    std::vector<Tensor> grads = {x.grad()};
    for (const Tensor& p : mlp.params()) grads.push_back(p.grad());
    x.set_grad(Tensor());
    mlp.zero_grads();
    return std::pair{out.detach(), grads};
  };
  auto [plain_out, plain_grads] = run(false);
  auto [ckpt_out, ckpt_grads] = run(true);
  require_close(ckpt_out, plain_out, 0, 0);
  REQUIRE(plain_grads.size() == ckpt_grads.size());
  for (size_t i = 0; i < plain_grads.size(); ++i) {
    INFO("gradient " << i);
    REQUIRE(ckpt_grads[i].defined());
    require_close(ckpt_grads[i], plain_grads[i], 1e-5, 1e-7);
  }
}

TEST_CASE("checkpoint: fewer live bytes after the forward", "[autograd][checkpoint]") {
  Mlp mlp(64, 256);
  Tensor x = randn({128, 64}).set_requires_grad(true);
  auto live_after_forward = [&](bool ckpt) {
    const int64_t before = memory_stats(kCPU).current_bytes;
    Tensor out = ckpt ? checkpoint(std::cref(mlp), {x})[0] : mlp({x})[0];
    Tensor loss = sum(out);
    const int64_t live = memory_stats(kCPU).current_bytes - before;
    autograd::backward({loss});
    x.set_grad(Tensor());
    mlp.zero_grads();
    return live;
  };
  const int64_t plain = live_after_forward(false);
  const int64_t ckpt = live_after_forward(true);
  INFO("plain " << plain << " bytes, checkpointed " << ckpt << " bytes");
  // The plain graph keeps (128, 256) activations for gelu, the second linear and more; the
  // checkpointed one keeps only the (128, 64) output.
  const int64_t hidden_act = 128 * 256 * 4;
  CHECK(plain >= 2 * hidden_act);
  CHECK(ckpt < hidden_act);
}

TEST_CASE("checkpoint: parameters get gradients when the input does not require grad", "[autograd][checkpoint]") {
  Mlp mlp(4, 6);
  Tensor x = randn({3, 4});
  manual_seed(1);
  autograd::backward({sum(mlp({x})[0])});
  std::vector<Tensor> plain;
  for (const Tensor& p : mlp.params()) plain.push_back(p.grad().clone());
  mlp.zero_grads();
  manual_seed(1);
  std::vector<Tensor> out = checkpoint(std::cref(mlp), {x});
  REQUIRE(out[0].requires_grad());
  autograd::backward({sum(out[0])});
  for (size_t i = 0; i < plain.size(); ++i) require_close(mlp.params()[i].grad(), plain[i], 1e-5, 1e-7);
}

TEST_CASE("checkpoint: several outputs, one unused; no graph under no_grad", "[autograd][checkpoint]") {
  Tensor x = from_vector({1, 2, 3}, {3}).set_requires_grad(true);
  auto fn = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{mul(in[0], in[0]), exp(in[0])}; };
  std::vector<Tensor> out = checkpoint(fn, {x});
  REQUIRE(out.size() == 2);
  autograd::backward({sum(out[0])});
  require_close(x.grad(), from_vector({2, 4, 6}, {3}), 0, 0);
  autograd::NoGradGuard no_grad;
  REQUIRE_FALSE(checkpoint(fn, {x})[0].requires_grad());
}

TEST_CASE("checkpoint: an input modified in place before backward is reported", "[autograd][checkpoint]") {
  Tensor w = from_vector({1, 2}, {2}).set_requires_grad(true);
  Tensor x = mul(w, 1.0);
  Tensor y = checkpoint([](const std::vector<Tensor>& in) { return std::vector<Tensor>{square(in[0])}; }, {x})[0];
  add_(x, ones({2}));
  REQUIRE_THROWS_WITH(autograd::backward({sum(y)}), Catch::Contains("[checkpoint] a tensor saved for backward was modified in place"));
}

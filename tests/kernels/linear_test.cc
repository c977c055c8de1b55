// Tests for the CPU fused linear (kernels::linear): x @ w^T + bias with an optional tanh GELU, against
// a double reference, for each floating dtype, strided views, no bias, and K = 0.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "core/factory.h"
#include "kernels/kernels.h"
#include "kernel_test_util.h"

namespace {

using namespace tessera;
using namespace tessera::kernel_test;
using kernels::Activation;

double gelu_tanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

// act(x w^T + b) in double, rounded to the output dtype.
std::vector<double> reference(const Tensor& x, const Tensor& w, const Tensor& bias, Activation act, DType dt) {
  const int64_t m = x.size(0), k = x.size(1), n = w.size(0);
  const std::vector<double> xv = values(x), wv = values(w);
  const std::vector<double> bv = bias.defined() ? values(bias) : std::vector<double>(size_t(n), 0.0);
  std::vector<double> out(size_t(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = bv[size_t(j)];
      for (int64_t c = 0; c < k; ++c) acc += xv[size_t(i * k + c)] * wv[size_t(j * k + c)];
      out[size_t(i * n + j)] = round_to(dt, act == Activation::gelu_tanh ? gelu_tanh(acc) : acc);
    }
  }
  return out;
}

// f32 sums of 67 O(1) products carry ~1e-6 relative error; 16-bit outputs one rounding more.
Tol linear_tol(DType dt) {
  const Tol t = tol_for(dt);
  return {std::max(t.rtol, 1e-5) * 2, 1e-5};
}

}  // namespace

TEST_CASE("cpu linear matches a double reference with bias and GELU", "[kernels][linear]") {
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    for (Activation act : {Activation::none, Activation::gelu_tanh}) {
      for (bool with_bias : {false, true}) {
        INFO(dtype_name(dt) << " gelu " << (act == Activation::gelu_tanh) << " bias " << with_bias);
        const int64_t m = 13, k = 67, n = 9;
        const Tensor x = uniform_tensor({m, k}, dt, -0.3, 0.3, 1);
        const Tensor w = uniform_tensor({n, k}, dt, -0.3, 0.3, 2);
        const Tensor bias = with_bias ? uniform_tensor({n}, dt, -1.0, 1.0, 3) : Tensor();
        const Tensor out = full({m, n}, 7.0, {.dtype = dt});
        kernels::linear(x, w, bias, act, out);
        check_close(values(out), reference(x, w, bias, act, dt), linear_tol(dt), "out");
      }
    }
  }
}

TEST_CASE("cpu linear reads strided views and writes a transposed out", "[kernels][linear]") {
  const Tensor xt = uniform_tensor({20, 11}, DType::f32, -1.0, 1.0, 4);  // x = xt^T (11, 20)
  const Tensor w2 = uniform_tensor({6, 40}, DType::f32, -1.0, 1.0, 5);   // w = every other column
  const Tensor x = xt.transpose(0, 1), w = w2.slice(1, 0, 40, 2);
  const Tensor bias = uniform_tensor({6}, DType::f32, -1.0, 1.0, 6);
  for (Activation act : {Activation::none, Activation::gelu_tanh}) {
    INFO("gelu " << (act == Activation::gelu_tanh));
    const Tensor out_t = zeros({6, 11});
    const Tensor out = out_t.transpose(0, 1);  // (11, 6), column-major
    kernels::linear(x, w, bias, act, out);
    check_close(values(out), reference(x, w, bias, act, DType::f32), {2e-5, 1e-5}, "out");
  }
}

// Big enough for several k-blocks and both threads: the bias is added once, in the first block.
TEST_CASE("cpu linear adds the bias once over several k-blocks and threads", "[kernels][linear]") {
  const int64_t m = 130, k = 1100, n = 100;
  const Tensor x = uniform_tensor({m, k}, DType::f32, -0.3, 0.3, 7);
  const Tensor w = uniform_tensor({n, k}, DType::f32, -0.3, 0.3, 8);
  const Tensor bias = uniform_tensor({n}, DType::f32, -1.0, 1.0, 9);
  const Tensor out = full({m, n}, std::nan(""));
  kernels::linear(x, w, bias, Activation::none, out);
  check_close(values(out), reference(x, w, bias, Activation::none, DType::f32), {1e-4, 1e-5}, "out");
}

TEST_CASE("cpu linear with K = 0 is act(bias), and checks its shapes", "[kernels][linear]") {
  const Tensor bias = from_vector(std::vector<float>{-2, -1, 0, 1, 2}, {5});
  for (Activation act : {Activation::none, Activation::gelu_tanh}) {
    const Tensor out = full({3, 5}, 9.0);
    kernels::linear(zeros({3, 0}), zeros({5, 0}), bias, act, out);
    check_close(values(out), reference(zeros({3, 0}), zeros({5, 0}), bias, act, DType::f32), {1e-6, 1e-7},
                "out");
  }
  REQUIRE_THROWS_WITH(kernels::linear(zeros({3, 4}), zeros({5, 3}), Tensor(), Activation::none, zeros({3, 5})),
                      Catch::Contains("expected x (M, K), w (N, K) and out (M, N)"));
}

// CUDA cross-entropy against the CPU kernel: losses, saved log-sum-exps and logit gradients with
// ignored rows and label smoothing, for f32/f16/bf16, a GPT-2-sized vocabulary, strided logits and
// the gradient written in place over the logits.
#include <catch2/catch.hpp>
#include <cmath>

#include "core/factory.h"
#include "kernels/kernels.h"
#include "tests/testing/compare.h"
#include "tests/testing/cuda.h"

using namespace tessera;
using testing::require_close;
using testing::to_doubles;

namespace {

constexpr int64_t kIgnore = -100;

Tensor gpu(const Tensor& t) { return t.to(cuda_device()); }

// Targets in [0, V) with every fifth row ignored.
Tensor targets_for(int64_t N, int64_t V, uint64_t seed) {
  Generator gen(seed);
  Tensor t = randint(0, V, {N}, {.dtype = DType::i64}, &gen);
  int64_t* p = t.data<int64_t>();
  for (int64_t i = 0; i < N; i += 5) p[i] = kIgnore;
  return t;
}

// Gradients are g * (softmax - one-hot): O(1) near the target, tiny elsewhere. 16-bit outputs may
// round the last bit differently.
// randn * scale + shift, rounded to dt.
Tensor scaled_randn(const Shape& shape, DType dt, double scale, Generator& gen, double shift = 0.0) {
  Tensor t = randn(shape, {}, &gen);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = float(p[i] * scale + shift);
  return t.to(dt);
}

double grad_rtol(DType t) { return t == DType::bf16 ? 1.6e-2 : t == DType::f16 ? 2e-3 : 1e-4; }

void run_case(int64_t N, int64_t V, DType dt, double smoothing, bool transposed) {
  INFO("N " << N << " V " << V << " " << dtype_name(dt) << " smoothing " << smoothing
            << " transposed " << transposed);
  Generator gen(N * 31 + V);
  // Logits spread over about +-6 so the softmax is far from uniform.
  const Tensor base = scaled_randn(transposed ? Shape{V, N} : Shape{N, V}, dt, 2.0, gen);
  const Tensor logits = transposed ? base.transpose(0, 1) : base;
  const Tensor logits_g = transposed ? gpu(base).transpose(0, 1) : gpu(base);
  const Tensor targets = targets_for(N, V, uint64_t(N + V));
  const Tensor grad = randn({N}, {}, &gen);

  const Tensor losses = empty({N}), lse = empty({N});
  kernels::cross_entropy(logits, targets, kIgnore, smoothing, losses, lse);
  const TensorOptions f32_gpu{.dtype = DType::f32, .device = cuda_device()};
  const Tensor losses_g = empty({N}, f32_gpu), lse_g = empty({N, 3}, f32_gpu).select(1, 2);
  kernels::cross_entropy(logits_g, gpu(targets), kIgnore, smoothing, losses_g, lse_g);
  require_close(lse_g, lse, 2e-5, 2e-5);
  require_close(losses_g, losses, 2e-5, 2e-5);
  const std::vector<double> lv = to_doubles(losses_g);
  for (int64_t i = 0; i < N; i += 5) CHECK(lv[size_t(i)] == 0.0);  // ignored rows

  const Tensor gl = empty({N, V}, {.dtype = dt});
  kernels::cross_entropy_backward(logits, targets, lse, grad, kIgnore, smoothing, gl);
  const Tensor gl_g = empty({N, V}, {.dtype = dt, .device = cuda_device()});
  kernels::cross_entropy_backward(logits_g, gpu(targets), lse_g, gpu(grad), kIgnore, smoothing, gl_g);
  require_close(gl_g, gl, grad_rtol(dt), 1e-6);

  // In place: the gradient overwrites the logits it is computed from.
  const Tensor inplace = logits_g.contiguous();
  kernels::cross_entropy_backward(inplace, gpu(targets), lse_g, gpu(grad).to(DType::bf16), kIgnore,
                                  smoothing, inplace);
  const Tensor gl_bf = empty({N, V}, {.dtype = dt});
  kernels::cross_entropy_backward(logits, targets, lse, grad.to(DType::bf16), kIgnore, smoothing,
                                  gl_bf);
  require_close(inplace, gl_bf, grad_rtol(dt), 1e-6);
}

}  // namespace

TEST_CASE("cuda cross_entropy matches the CPU, with ignored rows and label smoothing") {
  TS_REQUIRE_GPU();
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    run_case(1, 1, dt, 0.0, false);
    run_case(37, 1001, dt, 0.0, false);
    run_case(37, 1001, dt, 0.1, true);
    run_case(300, 7, dt, 0.2, false);
  }
  run_case(3, 50257, DType::f32, 0.1, false);  // GPT-2 vocabulary: long rows
  run_case(6, 50257, DType::bf16, 0.0, true);
}

TEST_CASE("cuda cross_entropy is stable for large logits and handles empty batches") {
  TS_REQUIRE_GPU();
  const TensorOptions f32_gpu{.dtype = DType::f32, .device = cuda_device()};
  // Logits around 1e4: exp without the max shift overflows; the loss must stay the CPU's.
  Generator gen(2);
  const Tensor logits = scaled_randn({4, 300}, DType::f32, 3.0, gen, 1e4);
  const Tensor targets = from_vector<int64_t>({0, 299, 17, 150}, {4});
  const Tensor losses = empty({4}), lse = empty({4});
  kernels::cross_entropy(logits, targets, kIgnore, 0.0, losses, lse);
  const Tensor losses_g = empty({4}, f32_gpu), lse_g = empty({4}, f32_gpu);
  kernels::cross_entropy(gpu(logits), gpu(targets), kIgnore, 0.0, losses_g, lse_g);
  require_close(losses_g, losses, 1e-4, 1e-4);
  require_close(lse_g, lse, 1e-6, 0.0);
  for (double v : to_doubles(losses_g)) CHECK(std::isfinite(v));

  // A row whose target is out of range (the CPU throws) is flagged with NaN, not a crash.
  const Tensor bad = from_vector<int64_t>({0, 300, 17, 150}, {4});
  kernels::cross_entropy(gpu(logits), gpu(bad), kIgnore, 0.0, losses_g, lse_g);
  CHECK(std::isnan(to_doubles(losses_g)[1]));

  const Tensor none = empty({0, 300}, f32_gpu);
  kernels::cross_entropy(none, empty({0}, {.dtype = DType::i64, .device = cuda_device()}), kIgnore,
                         0.0, empty({0}, f32_gpu), empty({0}, f32_gpu));
  CHECK_THROWS_WITH(kernels::cross_entropy(gpu(logits), gpu(targets).to(DType::i32), kIgnore, 0.0,
                                           losses_g, lse_g),
                    Catch::Contains("expected targets i64"));
}

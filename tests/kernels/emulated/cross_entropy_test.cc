// The cross-entropy bodies (kernels/cuda/cross_entropy_body.cuh) under the SIMT emulator against
// the CPU kernel: losses, log-sum-exps and logit gradients with ignored rows and label smoothing,
// for f32/f16/bf16, short and long rows, strided logits, the gradient written over the logits, and
// rows with -inf, +inf and NaN logits, fully masked rows and out-of-range targets.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "core/factory.h"
#include "kernels/cuda/cross_entropy_body.cuh"
#include "kernels/kernels.h"
#include "tests/testing/compare.h"
#include "tests/testing/simt_emulator.h"

namespace {

using namespace tessera;
namespace ce = tessera::kernels::cuda::cross_entropy_body;
using testing::require_close;
using testing::to_doubles;

constexpr int64_t kIgnore = -100;
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

ce::RowIo row_io(const Tensor& logits, const Tensor& targets, double smoothing) {
  return ce::RowIo{logits.size(0),          logits.size(1),    logits.stride(0), logits.stride(1),
                   targets.data<int64_t>(), targets.stride(0), kIgnore,          float(smoothing)};
}

// The launcher's forward: its grid (or `blocks` to exercise the grid-stride loop), its block size.
void emulated_forward(const Tensor& logits, const Tensor& targets, double smoothing,
                      const Tensor& losses, const Tensor& lse, int64_t blocks = 0) {
  const ce::RowIo io = row_io(logits, targets, smoothing);
  const int threads = ce::forward_threads(io.V);
  if (blocks == 0) blocks = ce::forward_blocks(io.N);
  dispatch_floating(logits.dtype(), "emulated cross_entropy", [&]<typename T>() {
    const T* x = static_cast<const T*>(logits.data_ptr());
    simt::emulate(blocks, threads, ce::kForwardSharedBytes,
                  [&](int64_t block, int tid, unsigned char* shared) {
                    ce::Forward<T>::run(x, io, losses.data<float>(), losses.stride(0),
                                        lse.data<float>(), lse.stride(0), threads, blocks, block,
                                        tid, shared);
                  });
  });
}

// The launcher's backward (grad_losses converted to f32 first, as it does).
void emulated_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                       const Tensor& grad_losses, double smoothing, const Tensor& grad_logits,
                       int64_t blocks = 0) {
  const ce::RowIo io = row_io(logits, targets, smoothing);
  const Tensor g = grad_losses.to(DType::f32);
  if (blocks == 0) blocks = ce::backward_blocks(io.N, io.V);
  dispatch_floating(logits.dtype(), "emulated cross_entropy_backward", [&]<typename T>() {
    const T* x = static_cast<const T*>(logits.data_ptr());
    T* out = static_cast<T*>(grad_logits.data_ptr());
    simt::emulate(blocks, ce::kBackwardThreads, 0, [&](int64_t block, int tid, unsigned char*) {
      ce::Backward<T>::run(x, io, lse.data<float>(), lse.stride(0), g.data<float>(), g.stride(0),
                           out, grad_logits.stride(0), grad_logits.stride(1), blocks, block, tid);
    });
  });
}

// Targets in [0, V) with every fifth row ignored.
Tensor targets_for(int64_t N, int64_t V, uint64_t seed) {
  Generator gen(seed);
  Tensor t = randint(0, V, {N}, {.dtype = DType::i64}, &gen);
  int64_t* p = t.data<int64_t>();
  for (int64_t i = 0; i < N; i += 5) p[i] = kIgnore;
  return t;
}

// randn * scale + shift, rounded to dt.
Tensor scaled_randn(const Shape& shape, DType dt, double scale, Generator& gen,
                    double shift = 0.0) {
  Tensor t = randn(shape, {}, &gen);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = float(p[i] * scale + shift);
  return t.to(dt);
}

// Gradients are g * (softmax - one-hot): O(1) near the target, tiny elsewhere; 16-bit outputs may
// round the last bit differently (expf here, exp_approx on the CPU).
double grad_rtol(DType t) { return t == DType::bf16 ? 1.6e-2 : t == DType::f16 ? 2e-3 : 1e-4; }

// Forward, backward and in-place backward of one problem against the CPU. `blocks` > 0 runs both
// bodies on that many blocks instead of the launcher's grid.
void run_case(int64_t N, int64_t V, DType dt, double smoothing, bool transposed,
              int64_t blocks = 0) {
  INFO("N " << N << " V " << V << " " << dtype_name(dt) << " smoothing " << smoothing
            << " transposed " << transposed << " blocks " << blocks);
  Generator gen(uint64_t(N * 31 + V));
  // Logits spread over about +-6 so the softmax is far from uniform.
  const Tensor base = scaled_randn(transposed ? Shape{V, N} : Shape{N, V}, dt, 2.0, gen);
  const Tensor logits = transposed ? base.transpose(0, 1) : base;
  const Tensor targets = targets_for(N, V, uint64_t(N + V));
  const Tensor grad = randn({N}, {}, &gen);

  const Tensor losses = empty({N}), lse = empty({N});
  kernels::cross_entropy(logits, targets, kIgnore, smoothing, losses, lse);
  // Garbage first, and lse through a strided view.
  const Tensor losses_e = full({N}, 7.0), lse_e = full({N, 3}, 7.0).select(1, 2);
  emulated_forward(logits, targets, smoothing, losses_e, lse_e, blocks);
  {
    INFO("lse");
    require_close(lse_e, lse, 2e-5, 2e-5);
  }
  {
    INFO("losses");
    require_close(losses_e, losses, 2e-5, 2e-5);
  }
  const std::vector<double> lv = to_doubles(losses_e);
  for (int64_t i = 0; i < N; i += 5) CHECK(lv[size_t(i)] == 0.0);  // ignored rows

  const Tensor gl = empty({N, V}, {.dtype = dt});
  kernels::cross_entropy_backward(logits, targets, lse, grad, kIgnore, smoothing, gl);
  const Tensor gl_e = full({N, V}, 7.0, {.dtype = dt});
  emulated_backward(logits, targets, lse, grad, smoothing, gl_e, blocks);
  {
    INFO("grad_logits");
    require_close(gl_e, gl, grad_rtol(dt), 1e-6);
  }

  // In place: the gradient overwrites the logits it is computed from (transposed storage too).
  const Tensor inplace = logits.clone();
  const Tensor view = transposed ? inplace.transpose(0, 1).contiguous().transpose(0, 1) : inplace;
  emulated_backward(view, targets, lse, grad.to(DType::bf16), smoothing, view, blocks);
  const Tensor gl_bf = empty({N, V}, {.dtype = dt});
  kernels::cross_entropy_backward(logits, targets, lse, grad.to(DType::bf16), kIgnore, smoothing,
                                  gl_bf);
  INFO("in place");
  require_close(view, gl_bf, grad_rtol(dt), 1e-6);
}

}  // namespace

TEST_CASE("cross_entropy (emulated) matches the CPU, with ignored rows and label smoothing",
          "[simt][cross_entropy]") {
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    run_case(1, 1, dt, 0.0, false);
    run_case(2, 1, dt, 0.3, false);
    run_case(37, 1001, dt, 0.0, false);
    run_case(37, 1001, dt, 0.1, true);
    run_case(300, 7, dt, 0.2, false);
    run_case(11, 31, dt, 1.0, true);
  }
  run_case(3, 5000, DType::f32, 0.1, false);  // long rows: 512-thread blocks, many passes
  run_case(4, 5000, DType::bf16, 0.0, true);
}

TEST_CASE("cross_entropy (emulated): grid-stride loops over more rows than blocks",
          "[simt][cross_entropy]") {
  run_case(23, 100, DType::f32, 0.1, false, 3);
  run_case(9, 1500, DType::bf16, 0.0, true, 2);
}

TEST_CASE("cross_entropy (emulated) is stable for large logits; bad targets give NaN",
          "[simt][cross_entropy]") {
  // Logits around 1e4: exp without the max shift overflows; the loss must stay the CPU's.
  Generator gen(2);
  const Tensor logits = scaled_randn({4, 300}, DType::f32, 3.0, gen, 1e4);
  const Tensor targets = from_vector<int64_t>({0, 299, 17, 150}, {4});
  const Tensor losses = empty({4}), lse = empty({4});
  kernels::cross_entropy(logits, targets, kIgnore, 0.0, losses, lse);
  const Tensor losses_e = full({4}, 7.0), lse_e = full({4}, 7.0);
  emulated_forward(logits, targets, 0.0, losses_e, lse_e);
  require_close(losses_e, losses, 1e-4, 1e-4);
  require_close(lse_e, lse, 1e-6, 0.0);
  for (double v : to_doubles(losses_e)) CHECK(std::isfinite(v));

  // A row whose target is out of range (the CPU throws) is flagged with NaN: loss and gradient.
  for (int64_t bad_target : {int64_t(300), int64_t(-1)}) {
    const Tensor bad = from_vector<int64_t>({0, bad_target, 17, 150}, {4});
    emulated_forward(logits, bad, 0.0, losses_e, lse_e);
    const std::vector<double> lv = to_doubles(losses_e);
    CHECK(std::isnan(lv[1]));
    CHECK(std::isfinite(lv[0]));
    const Tensor gl_e = full({4, 300}, 7.0);
    emulated_backward(logits, bad, lse, ones({4}), 0.0, gl_e);
    const std::vector<double> gv = to_doubles(gl_e);
    for (int64_t v = 0; v < 300; ++v) {
      CHECK(std::isnan(gv[size_t(300 + v)]));
      CHECK(std::isfinite(gv[size_t(v)]));
    }
  }
}

TEST_CASE("cross_entropy (emulated): -inf, +inf and NaN logits and masked rows like the CPU",
          "[simt][cross_entropy]") {
  // V = 200 runs on 128 threads: thread k reads columns k and k + 128.
  constexpr int64_t N = 9, V = 200;
  Generator gen(3);
  Tensor x = scaled_randn({N, V}, DType::f32, 2.0, gen);
  float* p = x.data<float>();
  auto at = [&](int64_t r, int64_t c) -> float& { return p[r * V + c]; };
  for (int64_t c = 100; c < V; ++c) at(0, c) = -kInf;           // a masked half of the vocabulary
  for (int64_t c = 0; c < V; ++c) at(1, c) = at(2, c) = -kInf;  // fully masked rows
  at(3, 5) = kNaN;    // a NaN that is thread 5's first logit
  at(4, 150) = kNaN;  // a NaN after a thread's first logit
  at(5, 9) = kInf;    // +inf: the CPU's exp(inf - inf) makes the row NaN
  for (int64_t c = 120; c < V; ++c) at(6, c) = -kInf;  // the target is masked: infinite loss
  at(7, 0) = kNaN;  // thread 0's first logit, which also starts the block's merge
  for (int64_t c = 1; c < V; ++c) at(8, c) = -kInf;  // a NaN and -inf elsewhere
  at(8, 0) = kNaN;
  const Tensor targets = from_vector<int64_t>({3, 7, kIgnore, 1, 2, 10, 130, 4, 0}, {N});
  for (double smoothing : {0.0, 0.1}) {
    for (DType dt : {DType::f32, DType::bf16}) {
      INFO("smoothing " << smoothing << " " << dtype_name(dt));
      const Tensor logits = x.to(dt);
      const Tensor losses = empty({N}), lse = empty({N});
      kernels::cross_entropy(logits, targets, kIgnore, smoothing, losses, lse);
      const Tensor losses_e = full({N}, 7.0), lse_e = full({N}, 7.0);
      emulated_forward(logits, targets, smoothing, losses_e, lse_e);
      {
        INFO("lse");
        require_close(lse_e, lse, 2e-5, 2e-5);
      }
      {
        INFO("losses");
        require_close(losses_e, losses, 2e-5, 2e-5);
      }
      const Tensor grad = randn({N}, {}, &gen);
      const Tensor gl = empty({N, V}, {.dtype = dt});
      kernels::cross_entropy_backward(logits, targets, lse, grad, kIgnore, smoothing, gl);
      const Tensor gl_e = full({N, V}, 7.0, {.dtype = dt});
      emulated_backward(logits, targets, lse, grad, smoothing, gl_e);
      INFO("grad_logits");
      require_close(gl_e, gl, grad_rtol(dt), 1e-6);
    }
  }
}

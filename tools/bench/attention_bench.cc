// Times the CPU fused attention (forward, backward) on GPT-2 124M shapes (H 12, D 64, causal).
// GFLOP/s counts 4*B*H*T*T*D for the forward halved by the causal mask, 2.5x that for the backward,
// the same convention as the `bench` table (tools/bench/cases.cc).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "core/factory.h"
#include "core/parallel.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/gemm.h"

namespace {

using namespace tessera;

// Median wall time after two warm-up calls, repeating until 0.5 s and 5 calls are spent.
double median_seconds(const std::function<void()>& fn) {
  fn();
  fn();
  std::vector<double> times;
  double spent = 0.0;
  while (times.size() < 5 || spent < 0.5) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    times.push_back(s);
    spent += s;
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  return times[times.size() / 2];
}

struct Shape4 {
  int64_t B, H, T, D;
};

void run(const Shape4& s) {
  Generator gen(0);
  const Shape shape{s.B, s.H, s.T, s.D};
  Tensor q = randn(shape, {}, &gen), k = randn(shape, {}, &gen), v = randn(shape, {}, &gen);
  Tensor go = randn(shape, {}, &gen);
  Tensor out = empty(shape), lse = empty({s.B, s.H, s.T});
  Tensor gq = empty(shape), gk = empty(shape), gv = empty(shape);
  const kernels::AttentionOptions opts{.causal = true};
  const double fwd_flops = 4.0 * s.B * s.H * double(s.T) * s.T * s.D / 2.0;
  const double fwd = median_seconds([&] { kernels::cpu::attention_forward(q, k, v, {}, opts, out, lse); });
  const double bwd = median_seconds(
      [&] { kernels::cpu::attention_backward(q, k, v, out, lse, go, {}, opts, gq, gk, gv); });
  std::printf("B%-2lld H%lld T%-5lld D%lld causal | fwd %8.2f ms %7.1f GFLOP/s | bwd %8.2f ms %7.1f GFLOP/s"
              " | fwd+bwd %8.2f ms %7.1f GFLOP/s\n",
              (long long)s.B, (long long)s.H, (long long)s.T, (long long)s.D, fwd * 1e3,
              fwd_flops / fwd * 1e-9, bwd * 1e3, 2.5 * fwd_flops / bwd * 1e-9, (fwd + bwd) * 1e3,
              3.5 * fwd_flops / (fwd + bwd) * 1e-9);
}

}  // namespace

int main(int argc, char** argv) {
  std::printf("Tessera CPU fused attention, %d threads, sgemm %s\n", num_threads(),
              kernels::cpu::sgemm_isa());
  for (const Shape4& s : {Shape4{4, 12, 256, 64}, Shape4{1, 12, 1024, 64}, Shape4{4, 12, 1024, 64}}) {
    run(s);
  }
  return 0;
}

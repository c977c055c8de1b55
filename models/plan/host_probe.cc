// The quick host measurements: an FMA loop in registers for one core's peak, a triad over arrays
// far larger than the caches for memory bandwidth, and Tessera's own SGEMM for one GEMM's speed.
#include "models/plan/host_probe.h"

#include <immintrin.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/factory.h"
#include "core/parallel.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm.h"
#include "kernels/kernels.h"

namespace tessera::plan {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Enough independent accumulators to cover the FMA latency on two ports (4 cycles x 2), a few
// more so the loop counter hides too; all fit the register file (16 ymm / 32 zmm).
constexpr int kAvx2Acc = 12;
constexpr int kAvx512Acc = 16;

// acc = acc * a + b converges to b / (1 - a) = 0.1: no overflow or denormals, however long.
// noipa: GCC would otherwise find the functions pure and reuse one call's result for the next.
__attribute__((noipa)) float fma_avx2(int64_t iters) {
  __m256 acc[kAvx2Acc];
  for (int j = 0; j < kAvx2Acc; ++j) acc[j] = _mm256_set1_ps(1.0f + 0.001f * j);
  const __m256 a = _mm256_set1_ps(0.5f), b = _mm256_set1_ps(0.05f);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int j = 0; j < kAvx2Acc; ++j) acc[j] = _mm256_fmadd_ps(acc[j], a, b);
  }
  __m256 sum = acc[0];
  for (int j = 1; j < kAvx2Acc; ++j) sum = _mm256_add_ps(sum, acc[j]);
  return _mm256_cvtss_f32(sum);
}

TS_AVX512_TARGET __attribute__((noipa)) float fma_avx512(int64_t iters) {
  __m512 acc[kAvx512Acc];
  for (int j = 0; j < kAvx512Acc; ++j) acc[j] = _mm512_set1_ps(1.0f + 0.001f * j);
  const __m512 a = _mm512_set1_ps(0.5f), b = _mm512_set1_ps(0.05f);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int j = 0; j < kAvx512Acc; ++j) acc[j] = _mm512_fmadd_ps(acc[j], a, b);
  }
  __m512 sum = acc[0];
  for (int j = 1; j < kAvx512Acc; ++j) sum = _mm512_add_ps(sum, acc[j]);
  return _mm512_cvtss_f32(sum);
}

volatile float g_sink;  // keeps the FMA results alive

// Replaces every source under `field` ("peak_flops" covers "peak_flops.bf16") with `text`.
void set_source(nlohmann::json& sources, const std::string& field, const std::string& text) {
  for (auto it = sources.begin(); it != sources.end();) {
    const std::string& key = it.key();
    if (key == field || key.rfind(field + ".", 0) == 0)
      it = sources.erase(it);
    else
      ++it;
  }
  sources[field] = text;
}

}  // namespace

ScopedThreads::ScopedThreads(int n) : old_(num_threads()) { set_num_threads(n); }
ScopedThreads::~ScopedThreads() { set_num_threads(old_); }

int host_cores() { return int(std::max(1u, std::thread::hardware_concurrency())); }

int64_t host_ram_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? int64_t(pages) * int64_t(page) : 0;
}

double measure_core_peak_flops(double seconds, int rounds) {
  const bool avx512 = kernels::cpu::active_isa() == kernels::cpu::Isa::avx512;
  const double flops_per_iter = avx512 ? 2.0 * 16 * kAvx512Acc : 2.0 * 8 * kAvx2Acc;
  auto run = [&](int64_t iters) { g_sink = avx512 ? fma_avx512(iters) : fma_avx2(iters); };
  // Grow the loop until one run takes `seconds`, then keep the fastest of `rounds` runs.
  int64_t iters = 1 << 12;
  double t = 0;
  for (;;) {
    const double start = now_s();
    run(iters);
    t = now_s() - start;
    if (t >= seconds || iters > (int64_t(1) << 40)) break;
    iters *= t > 0 ? std::clamp<int64_t>(int64_t(seconds / t) + 1, 2, 16) : 16;
  }
  double best = t;
  for (int r = 1; r < rounds; ++r) {
    const double start = now_s();
    run(iters);
    best = std::min(best, now_s() - start);
  }
  return flops_per_iter * double(iters) / best;
}

double measure_memory_bandwidth(int threads, int64_t array_bytes, int rounds) {
  const int64_t n = std::max<int64_t>(1024, array_bytes / int64_t(sizeof(float)));
  // Allocated without initialising: each thread touches its own static chunk first, so on a
  // multi-socket machine every page lands beside the thread that streams it.
  const Tensor a = empty({n}), b = empty({n}), c = empty({n});
  float* pa = a.data<float>();
  float* pb = b.data<float>();
  float* pc = c.data<float>();
  threads = std::max(1, threads);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    pa[i] = 0.0f;
    pb[i] = 1.0f;
    pc[i] = 2.0f;
  }
  // Two streaming loops, each counted as two reads and a write per element: the triad, and the
  // element-wise kernels' own add (it reaches more here than the triad's plain OpenMP loop).
  ScopedThreads scope(threads);
  double best = 0;
  for (int r = 0; r < std::max(1, rounds); ++r) {
    const float s = 0.5f + 0.001f * r;
    double start = now_s();
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < n; ++i) pa[i] = pb[i] + s * pc[i];
    double t = now_s() - start;
    if (t > 0) best = std::max(best, 3.0 * double(n) * sizeof(float) / t);
    start = now_s();
    kernels::binary(kernels::BinaryOp::add, b, c, a);
    t = now_s() - start;
    if (t > 0) best = std::max(best, 3.0 * double(n) * sizeof(float) / t);
  }
  g_sink = pa[n / 2];
  return best;
}

double measure_sgemm_flops(int64_t m, int64_t n, int64_t k, int threads, double seconds) {
  TS_CHECK(m > 0 && n > 0 && k > 0, "host_probe", "expected positive GEMM sizes, got ", m, " x ", n,
           " x ", k);
  std::vector<float> a(m * k, 0.5f), b(k * n, 0.25f), c(m * n);
  ScopedThreads scope(threads);
  auto call = [&] {
    kernels::cpu::sgemm(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
  };
  call();  // packing buffers and thread start-up stay out of the timed calls
  double best = 1e300, spent = 0;
  for (int reps = 0; reps < 3 || (spent < seconds && reps < 1000); ++reps) {
    const double start = now_s();
    call();
    const double t = now_s() - start;
    best = std::min(best, t);
    spent += t;
  }
  return 2.0 * double(m) * double(n) * double(k) / best;
}

const HostProbe& quick_host_probe() {
  static const HostProbe probe = [] {
    HostProbe p;
    p.core_peak_flops = measure_core_peak_flops();
    p.memory_bandwidth = measure_memory_bandwidth(host_cores());
    const int64_t s = 512;
    p.gemm_flops = 2.0 * s * s * s;
    p.gemm_efficiency = measure_sgemm_flops(s, s, s, 1) / p.core_peak_flops;
    return p;
  }();
  return probe;
}

ClusterProfile probed_host_profile(ClusterProfile p, const HostProbe& probe) {
  TS_CHECK(probe.core_peak_flops > 0 && probe.memory_bandwidth > 0 && probe.gemm_efficiency > 0,
           "host_probe", "expected positive measurements, got peak ", probe.core_peak_flops,
           " FLOP/s, bandwidth ", probe.memory_bandwidth, " B/s, GEMM efficiency ",
           probe.gemm_efficiency);
  p.cores = host_cores();
  if (const int64_t ram = host_ram_bytes(); ram > 0) {
    p.device_memory = ram;
    set_source(p.sources, "device_memory",
               "this machine's RAM (sysconf _SC_PHYS_PAGES x _SC_PAGE_SIZE)");
  }
  set_source(p.sources, "cores", "std::thread::hardware_concurrency() on this machine");
  const double f32 = p.peak(DType::f32);
  for (auto& [dtype, flops] : p.peak_flops) {
    flops = flops / f32 * probe.core_peak_flops * p.cores;
  }
  set_source(p.sources, "peak_flops",
             "quick probe (models/plan/host_probe.cc): one core's f32 FMA loop x cores; bf16 and "
             "f16 keep the bundled ratio to f32");
  p.memory_bandwidth = probe.memory_bandwidth;
  set_source(p.sources, "memory_bandwidth",
             "quick probe: the best of a triad and Tessera's f32 add over 3 x 32 MiB arrays on "
             "every core");
  TS_CHECK(probe.gemm_flops > 0, "host_probe", "expected the probe GEMM's FLOPs, got ",
           probe.gemm_flops);
  const double scale = probe.gemm_efficiency / p.gemm_efficiency_at(probe.gemm_flops);
  for (auto& point : p.gemm_efficiency) point.second = std::min(1.0, point.second * scale);
  set_source(p.sources, "gemm_efficiency",
             "the bundled curve's shape, scaled to a 512^3 f32 GEMM's efficiency measured on one "
             "core of this machine (quick probe)");
  p.description +=
      " (uncalibrated: bundled defaults completed by a quick probe; run `tessera plan "
      "calibrate` for a measured profile)";
  return p;
}

}  // namespace tessera::plan

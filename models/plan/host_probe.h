// Quick measurements of this machine for the host profile: one core's FMA peak, the memory
// bandwidth with every core, and a one-core GEMM. load_cluster("host") completes the bundled host
// defaults with them when no calibrated profile exists; `tessera plan calibrate` reuses them.
#pragma once

#include <cstdint>

#include "models/plan/cluster.h"

namespace tessera::plan {

// Sets the kernels' thread count (core/parallel.h) for a scope and puts the old one back. Not for
// use while kernels run on other threads.
class ScopedThreads {
 public:
  explicit ScopedThreads(int n);
  ~ScopedThreads();
  ScopedThreads(const ScopedThreads&) = delete;
  ScopedThreads& operator=(const ScopedThreads&) = delete;

 private:
  int old_;
};

// Logical CPUs (std::thread::hardware_concurrency), at least 1.
int host_cores();
// Physical RAM in bytes (sysconf); 0 when unknown.
int64_t host_ram_bytes();

// f32 FLOP/s of one core running independent FMAs in registers with the ISA the kernels use
// (AVX-512 where active, else AVX2): the best of `rounds` runs of about `seconds` each. Many
// short runs, not a few long ones: on a shared machine a millisecond now and then runs alone,
// whereas a long run always pays for the others.
double measure_core_peak_flops(double seconds = 0.001, int rounds = 30);

// Bytes/s streamed over three arrays of `array_bytes` each with `threads` threads, counted as
// STREAM does (two reads and a write per element): the best of `rounds` passes of a triad
// a = b + s c and of the element-wise kernels' add (kernels::binary), whichever is faster.
double measure_memory_bandwidth(int threads, int64_t array_bytes = int64_t(32) << 20,
                                int rounds = 4);

// FLOP/s of Tessera's f32 GEMM C (m, n) = A (m, k) B (k, n) on `threads` threads: the best of
// repeated calls over about `seconds`. The thread count is restored afterwards.
double measure_sgemm_flops(int64_t m, int64_t n, int64_t k, int threads, double seconds = 0.05);

// What the quick probe found.
struct HostProbe {
  double core_peak_flops = 0;   // one core, f32
  double memory_bandwidth = 0;  // every core
  double gemm_flops = 0;        // the FLOPs of the GEMM below (2 x 512^3)
  double gemm_efficiency = 0;   // a 512^3 f32 GEMM on one core / core_peak_flops
};
// Measures once per process (about 0.2 s) and remembers the result.
const HostProbe& quick_host_probe();

// `defaults` (the bundled host profile) made this machine's: cores and RAM detected, the f32 peak
// = one core's measured peak x cores (the 16-bit peaks keep their ratio to f32), the memory
// bandwidth measured, and the GEMM curve scaled so that at the probe GEMM's FLOPs it gives the
// efficiency measured (the curve's shape is the bundled one; no point above 1). Sources name the
// probe.
ClusterProfile probed_host_profile(ClusterProfile defaults, const HostProbe& probe);

}  // namespace tessera::plan

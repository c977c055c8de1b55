// Run-time CPU feature queries and ISA dispatch, so kernels built at the x86-64-v3 baseline can
// run AVX-512 code paths on hosts that have them.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>

// Functions compiled for AVX-512 although the file is built at x86-64-v3. Feature flags, not
// "arch=x86-64-v4": GCC inlines nothing (always_inline math included) into a caller of another
// arch. An attribute, not a per-file -m flag, so every inline function is compiled one way in
// every TU.
#define TS_AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))

namespace tessera::kernels::cpu {

enum class Isa : int { avx2 = 0, avx512 = 1 };

// Tags handed to with_isa bodies. kFloatLanes: f32 lanes of one vector register.
struct IsaAvx2 {
  static constexpr Isa kIsa = Isa::avx2;
  static constexpr int kFloatLanes = 8;
};
struct IsaAvx512 {
  static constexpr Isa kIsa = Isa::avx512;
  static constexpr int kFloatLanes = 16;
};

// True when the CPU and OS support AVX-512 F/BW/VL/DQ, whatever TESSERA_ISA says.
bool cpu_supports_avx512();

const char* isa_name(Isa isa);

// One core's L1 data cache in bytes, as the OS reports it (32 KiB where it does not).
int64_t l1d_cache_bytes();

// Pins the ISA kernels use (tests run both paths in one process); nullopt returns to the default
// (AVX-512 when supported, unless TESSERA_ISA=avx2). Pinning avx512 without hardware support
// throws. Not for use while kernels run on other threads.
void set_isa_override_for_testing(std::optional<Isa> isa);

namespace detail {
// Isa as an int once known, -1 before the first query. Relaxed loads: it only ever changes from
// -1 to the detected value (or under set_isa_override_for_testing, between kernels).
inline std::atomic<int> g_active_isa{-1};
Isa detect_active_isa();

// AVX-512 bodies run on this thread so far (tests check the fast path was really taken).
// initial-exec: one %fs-relative add, not a __tls_get_addr call, in the shared library too.
inline thread_local uint64_t t_avx512_runs __attribute__((tls_model("initial-exec"))) = 0;

// Flatten inlines the body and everything it calls into these functions, so the body's loops are
// compiled (and vectorised) for the function's ISA.
template <typename Fn>
TS_AVX512_TARGET __attribute__((flatten)) decltype(auto) run_avx512(Fn& fn) {
  ++t_avx512_runs;
  return fn(IsaAvx512{});
}
template <typename Fn>
__attribute__((flatten)) decltype(auto) run_avx2(Fn& fn) {
  return fn(IsaAvx2{});
}
}  // namespace detail

// The ISA kernels use: AVX-512 when the CPU has it, unless TESSERA_ISA=avx2 or a test pins one.
inline Isa active_isa() {
  const int isa = detail::g_active_isa.load(std::memory_order_relaxed);
  return isa >= 0 ? Isa(isa) : detail::detect_active_isa();
}

// Kept for the GEMM driver: active_isa() == Isa::avx512.
inline bool cpu_has_avx512() { return active_isa() == Isa::avx512; }

inline uint64_t avx512_runs_on_this_thread() { return detail::t_avx512_runs; }

// Runs fn(IsaAvx512{}) or fn(IsaAvx2{}) compiled for that ISA (when optimising): fn's loops
// vectorise to 512-bit or 256-bit registers, and the tag picks lane counts for explicit vectors.
// Calls fn makes through pointers (std::function, OpenMP regions) stay baseline code, so call it
// inside a parallel_for body, not around one. What fn calls and is not inlined keeps its baseline
// code, so AVX-512 instructions run only in run_avx512 and TS_AVX512_TARGET functions, which are
// reached only when active_isa() chose AVX-512.
template <typename Fn>
decltype(auto) with_isa(Fn&& fn) {
  if (active_isa() == Isa::avx512) return detail::run_avx512(fn);
  return detail::run_avx2(fn);
}

}  // namespace tessera::kernels::cpu

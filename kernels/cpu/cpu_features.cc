// Run-time CPU feature detection (CPUID through the compiler's builtins), cached per process, and
// the test override of the ISA choice.
#include "kernels/cpu/cpu_features.h"

#include <cstdlib>
#include <cstring>
#include <unistd.h>

#include "core/error.h"

namespace tessera::kernels::cpu {
namespace {

// TESSERA_ISA=avx2 lets tests and benchmarks exercise the AVX2 kernels on an AVX-512 host.
bool isa_forced_to_avx2() {
  const char* isa = std::getenv("TESSERA_ISA");
  return isa != nullptr && std::strcmp(isa, "avx2") == 0;
}

bool detect_avx512() {
  __builtin_cpu_init();
  // libgcc also checks that the OS saves the ZMM state (XGETBV), so true means usable.
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}

Isa default_isa() {
  return cpu_supports_avx512() && !isa_forced_to_avx2() ? Isa::avx512 : Isa::avx2;
}

}  // namespace

bool cpu_supports_avx512() {
  static const bool supported = detect_avx512();
  return supported;
}

const char* isa_name(Isa isa) { return isa == Isa::avx512 ? "avx512" : "avx2"; }

int64_t l1d_cache_bytes() {
  static const int64_t bytes = [] {
    const long reported = sysconf(_SC_LEVEL1_DCACHE_SIZE);
    return reported > 0 ? int64_t(reported) : int64_t{32} * 1024;
  }();
  return bytes;
}

void set_isa_override_for_testing(std::optional<Isa> isa) {
  TS_CHECK(isa != Isa::avx512 || cpu_supports_avx512(), "set_isa_override_for_testing",
           "expected a CPU with AVX-512 to pin avx512, got one without");
  detail::g_active_isa.store(int(isa.value_or(default_isa())), std::memory_order_relaxed);
}

namespace detail {
Isa detect_active_isa() {
  const Isa isa = default_isa();
  g_active_isa.store(int(isa), std::memory_order_relaxed);
  return isa;
}
}  // namespace detail

}  // namespace tessera::kernels::cpu

// Run-time CPU feature detection (CPUID through the compiler's builtins), cached per process.
#include "kernels/cpu/cpu_features.h"

#include <cstdlib>
#include <cstring>

namespace tessera::kernels::cpu {
namespace {

// TESSERA_ISA=avx2 lets tests and benchmarks exercise the AVX2 kernels on an AVX-512 host.
bool isa_forced_to_avx2() {
  const char* isa = std::getenv("TESSERA_ISA");
  return isa != nullptr && std::strcmp(isa, "avx2") == 0;
}

bool detect_avx512() {
  if (isa_forced_to_avx2()) return false;
  __builtin_cpu_init();
  // libgcc also checks that the OS saves the ZMM state (XGETBV), so true means usable.
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}

}  // namespace

bool cpu_has_avx512() {
  static const bool has_avx512 = detect_avx512();
  return has_avx512;
}

}  // namespace tessera::kernels::cpu

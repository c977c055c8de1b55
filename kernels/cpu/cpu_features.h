// Run-time CPU feature queries, so kernels built at the x86-64-v3 baseline can pick faster
// AVX-512 code paths on hosts that have them.
#pragma once

namespace tessera::kernels::cpu {

// True when the CPU and OS support AVX-512 F/BW/VL/DQ and the environment does not force the
// AVX2 path with TESSERA_ISA=avx2. Detected once per process and cached.
bool cpu_has_avx512();

}  // namespace tessera::kernels::cpu

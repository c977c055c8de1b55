// Body of the CUDA dropout kernel (dropout.cu) over kernels/cuda/simt.cuh, so it also runs under
// the SIMT emulator: the keep test of kernels/dropout_math.h on philox(seed, offset + i) for the
// flat index i, in a grid-stride loop whose shape never changes the mask.
#pragma once

#include <cstdint>

#include "kernels/cuda/simt.cuh"
#include "kernels/dropout_math.h"

namespace tessera::kernels::cuda::dropout_body {

inline constexpr int kThreads = 256;
inline constexpr int64_t kMaxBlocks = 1 << 20;  // the grid-stride loop covers the rest

// Blocks for n elements.
inline unsigned grid_for(int64_t n) { return unsigned(simt::grid_blocks(n, kThreads, kMaxBlocks)); }

// x, out: (n) contiguous. out may alias x.
template <typename T>
TS_SIMT void dropout(const T* x, T* out, int64_t n, uint64_t seed, uint64_t offset,
                     uint32_t threshold, float scale, int64_t block, int64_t blocks, int tid,
                     int threads) {
  for (int64_t i = block * threads + tid; i < n; i += blocks * threads) {
    // The same expression as the CPU loop, so kept values round identically.
    out[i] = dropout_keep(seed, offset + uint64_t(i), threshold) ? T(float(x[i]) * scale) : T(0.0f);
  }
}

}  // namespace tessera::kernels::cuda::dropout_body

// Device helpers of the CUDA attention kernels: tile loads into shared memory (any strides, f32
// out) and warp reductions.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/cuda/runtime.h"
#include "core/half.h"
#include "kernels/cuda/attention_common.h"
#include "kernels/cuda/attention_mask.h"
#include "kernels/cuda/simt.cuh"

namespace tessera::kernels::cuda::attention_detail {

// Shared-memory row stride of a (rows, D) tile: odd, so a warp reading one column of 32 rows hits
// 32 different banks.
template <int D>
inline constexpr int kLd = D + 1;

// Rows [l0, l0 + n) of head (b, h) of x into tile (kRows, D) with row stride kLd<D>, as f32; rows
// n..kRows are zero, so products over them add nothing (and never 0 * garbage = NaN).
template <typename T, int D, int kRows>
__device__ __forceinline__ void load_rows(const Operand& x, int64_t b, int64_t h, int64_t l0, int n,
                                          float* tile) {
  const T* base = static_cast<const T*>(x.data) + b * x.sb + h * x.sh;
  for (int idx = threadIdx.x; idx < kRows * D; idx += kThreads) {
    const int r = idx / D, c = idx % D;
    tile[r * kLd<D> + c] = r < n ? float(base[(l0 + r) * x.sl + int64_t(c) * x.sd]) : 0.0f;
  }
}

using simt::warp_max;
using simt::warp_sum;

// Opts a kernel into more than 48 KB of dynamic shared memory (once per kernel is enough, but the
// call is cheap and keeps the launchers stateless).
template <typename Kernel>
void allow_shared_bytes(Kernel kernel, size_t bytes) {
  TS_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

}  // namespace tessera::kernels::cuda::attention_detail

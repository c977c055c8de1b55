// Device helpers of the CUDA attention kernels: tile loads into shared memory (any strides, f32
// out), the visibility and dropout tests of one (query, key) pair, and warp reductions.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/cuda/runtime.h"
#include "core/half.h"
#include "core/philox.h"
#include "kernels/cuda/attention_common.h"

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

// Whether query t may see key s of batch b (padding mask and causal diagonal).
__device__ __forceinline__ bool visible(const Problem& p, int64_t b, int64_t t, int64_t s) {
  if (p.mask != nullptr && p.mask[b * p.mask_sb + s * p.mask_ss] == 0) return false;
  return !p.causal || s <= t + p.shift;
}

// The dropout factor of probability (t, s) of head bh: keep_scale when philox keeps it, else 0;
// the same counter and compare as the CPU kernels, so both draw the same mask.
__device__ __forceinline__ float dropout_factor(const Problem& p, int64_t bh, int64_t t, int64_t s) {
  const uint64_t index = p.offset + uint64_t(bh * p.T + t) * uint64_t(p.S) + uint64_t(s);
  return philox_uniform(p.seed, index) >= p.dropout_p ? p.keep_scale : 0.0f;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
  return v;
}

// One past the last key any query in [t0, t0 + nq) may see.
__host__ __device__ inline int64_t key_end(const Problem& p, int64_t t0, int64_t nq) {
  if (!p.causal) return p.S;
  const int64_t e = t0 + nq + p.shift;
  return e < 0 ? 0 : (e > p.S ? p.S : e);
}

// The first query that may see key s0.
__host__ __device__ inline int64_t query_begin(const Problem& p, int64_t s0) {
  if (!p.causal) return 0;
  return s0 - p.shift > 0 ? s0 - p.shift : 0;
}

// Opts a kernel into more than 48 KB of dynamic shared memory (once per kernel is enough, but the
// call is cheap and keeps the launchers stateless).
template <typename Kernel>
void allow_shared_bytes(Kernel kernel, size_t bytes) {
  TS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

}  // namespace tessera::kernels::cuda::attention_detail

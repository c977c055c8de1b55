// Small helpers shared by the CUDA nn kernels (layer norm, dropout, embedding, cross-entropy,
// Adam): launch plumbing (device guard, stream, grid sizes, launch checks), warp and block sums,
// and the contiguous-output pattern of the CPU kernels.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/cuda/runtime.h"
#include "core/factory.h"
#include "core/tensor.h"

namespace tessera::kernels::cuda::nn_util {

// Makes t's device current for the scope (streams and launches belong to one device).
class DeviceGuard {
 public:
  explicit DeviceGuard(Device d) {
    TS_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != d.index) TS_CUDA_CHECK(cudaSetDevice(d.index));
  }
  ~DeviceGuard() { cudaSetDevice(previous_); }  // never throws
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

inline cudaStream_t stream_for(const Tensor& t) {
  return ::tessera::cuda::current_stream(t.device().index);
}

inline void check_launch() { TS_CUDA_CHECK(cudaGetLastError()); }

// Blocks for a grid-stride loop over n items: enough to fill the GPU, never above the cap (the
// kernels loop over the rest).
inline unsigned grid_for(int64_t n, int threads, int64_t cap = 65536) {
  const int64_t blocks = (n + threads - 1) / threads;
  return unsigned(std::max<int64_t>(1, std::min(blocks, cap)));
}

// A contiguous tensor the kernel can write `out`'s values into: `out` itself when contiguous,
// else a scratch that finish_output copies back (stream-ordered, like every copy of the backend).
inline Tensor contiguous_output(const Tensor& out) {
  if (out.is_contiguous()) return out;
  return empty(out.shape(), {.dtype = out.dtype(), .device = out.device()});
}
inline void finish_output(const Tensor& written, const Tensor& out) {
  if (!written.is_same(out)) out.copy_(written);
}

inline void check_on_device(const Tensor& t, Device d, const char* op, const char* name) {
  TS_CHECK(!t.defined() || t.device() == d, op, "expected ", name, " on ", d.str(), ", got ",
           t.describe());
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
  return v;
}

// Sum of v over the whole block (blockDim.x a multiple of 32, at most 1024), returned to every
// thread. `shared` holds 32 floats; every thread of the block must call this.
__device__ __forceinline__ float block_sum(float v, float* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // shared may still be read by a previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float total = lane < warps ? shared[lane] : 0.0f;
  return warp_sum(total);
}

}  // namespace tessera::kernels::cuda::nn_util

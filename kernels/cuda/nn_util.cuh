// Small host helpers shared by the CUDA nn kernels (layer norm, dropout, embedding, cross-entropy,
// Adam): launch plumbing (device guard, stream, grid sizes, launch checks) and the
// contiguous-output pattern of the CPU kernels. Device code lives in the *_body.cuh files.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/cuda/runtime.h"
#include "core/factory.h"
#include "core/tensor.h"
#include "kernels/cuda/simt.cuh"

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
  return unsigned(simt::grid_blocks(n, threads, cap));
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

}  // namespace tessera::kernels::cuda::nn_util

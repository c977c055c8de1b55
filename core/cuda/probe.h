// A trivial kernel that proves nvcc-built objects link and launch (see tests/core/cuda).
#pragma once

#include <cuda_runtime_api.h>

namespace tessera::cuda {
// y = a * x + y on device pointers, queued on stream.
void probe_axpy(int n, float a, const float* x, float* y, cudaStream_t stream);
}  // namespace tessera::cuda

// A one-kernel self-test of the build: compiled by nvcc into //core/cuda, run by tests that have a GPU.
#include "core/cuda/probe.h"
#include "core/cuda/runtime.h"

namespace tessera::cuda {
namespace {
__global__ void axpy_kernel(int n, float a, const float* x, float* y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
}  // namespace

void probe_axpy(int n, float a, const float* x, float* y, cudaStream_t stream) {
  axpy_kernel<<<(n + 255) / 256, 256, 0, stream>>>(n, a, x, y);
  TS_CUDA_CHECK(cudaGetLastError());
}
}  // namespace tessera::cuda

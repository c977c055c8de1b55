// Host helper of the CUDA attention launchers (the device code lives in the *_body.cuh files).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "core/cuda/runtime.h"

namespace tessera::kernels::cuda::attention_detail {

// Opts a kernel into more than 48 KB of dynamic shared memory (once per kernel is enough, but the
// call is cheap and keeps the launchers stateless).
template <typename Kernel>
void allow_shared_bytes(Kernel kernel, size_t bytes) {
  TS_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

}  // namespace tessera::kernels::cuda::attention_detail

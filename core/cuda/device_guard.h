// DeviceGuard: makes a CUDA device current for the CUDA runtime within a scope and restores the
// previous one on exit, so backend code can work on a tensor's device without disturbing callers.
#pragma once

#include <cuda_runtime_api.h>

#include "core/cuda/runtime.h"

namespace tessera::cuda {

class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    TS_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device) TS_CUDA_CHECK(cudaSetDevice(device));
    changed_ = previous_ != device;
  }
  ~DeviceGuard() {
    if (changed_) (void)cudaSetDevice(previous_);  // destructors never throw
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  bool changed_ = false;
};

}  // namespace tessera::cuda

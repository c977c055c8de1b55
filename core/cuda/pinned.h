// Pinned (page-locked) host memory: CPU tensors the GPU can copy to and from asynchronously, which
// offload needs. Their bytes count in memory_stats(kCPU) like any CPU allocation.
#pragma once

#include "core/tensor.h"

namespace tessera::cuda {

// An uninitialised CPU tensor whose storage is cudaHostAlloc'd. Needs a usable GPU (ValueError
// naming unavailable_reason() otherwise).
Tensor pinned_empty(const Shape& shape, DType dtype = DType::f32);
// A pinned, contiguous copy of t (any device).
Tensor pin_memory(const Tensor& t);
// Whether t's storage is pinned memory from pinned_empty (views of it included).
bool is_pinned(const Tensor& t);

}  // namespace tessera::cuda

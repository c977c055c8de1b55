// The caching allocator for CUDA memory: one BlockPool per device over cudaMalloc/cudaFree and CUDA
// events, registered as the Allocator of DeviceType::cuda (see block_pool.h for the size classes).
// Memory freed by a tensor is cached for reuse by work on the same stream; empty_cache() returns
// it.
#pragma once

#include <cuda_runtime_api.h>

#include "core/allocator.h"
#include "core/cuda/block_pool.h"
#include "core/tensor.h"

namespace tessera::cuda {

// The Allocator registered for DeviceType::cuda. Without a usable GPU, allocate() throws
// ValueError "[cuda alloc] ..." naming unavailable_reason().
Allocator& caching_allocator();

// The block pool's counters for one device (all zero before its first allocation).
BlockPoolStats allocator_stats(int device);
void reset_peak_allocator_stats(int device);
// Returns every cached, unused segment of every device to the driver.
void empty_cache();
// The tensor's memory is also used by work queued on `stream`: when the tensor is freed, its block
// is reused only after that work has finished.
void record_stream(const Tensor& t, cudaStream_t stream);

}  // namespace tessera::cuda

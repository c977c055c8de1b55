// Copies and fills that touch CUDA memory, registered with core/copy.h so copy_tensor, fill_tensor
// and therefore Tensor::to, contiguous, clone and fill_ work on cuda tensors.
#pragma once

#include <cuda_runtime_api.h>

#include "core/tensor.h"

namespace tessera::cuda {

// dst[i] = convert(src[i]) for any strides and dtypes where src or dst is on a CUDA device (casts
// round like the CPU copy, through core/half.h). Queued on current_stream(device). Synchronous
// with respect to the host whenever a host buffer is involved (the result is readable and the
// source reusable at return), and across devices; device-to-device on one device is stream-ordered.
void device_copy(const Tensor& src, const Tensor& dst);
// Every element of a cuda tensor set to value (converted like the CPU fill), stream-ordered.
void device_fill(const Tensor& dst, double value);

// Queues a byte copy on `stream` and returns at once: same shape and dtype, both contiguous,
// host-device pairs through pinned memory (see pinned.h), or device to device. The caller keeps
// both tensors alive, and orders `stream` after the work that produced src (Event::wait), until the
// stream has passed the copy (record_stream for device memory, synchronize for host memory).
void copy_async(const Tensor& src, const Tensor& dst, cudaStream_t stream);

}  // namespace tessera::cuda

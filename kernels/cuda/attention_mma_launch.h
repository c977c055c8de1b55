// Launchers of the tensor-core attention kernels (attention_mma_body.cuh) for f16 and bf16; the f32
// kernels in attention_forward.cu and attention_backward.cu call them after validating the problem.
#pragma once

#include <cuda_runtime.h>

#include "core/tensor.h"
#include "kernels/cuda/attention_common.h"

namespace tessera::kernels::cuda::attention_mma {

// Whether the tensor-core kernels take problems of this dtype: f16 and bf16, unless the environment
// sets TESSERA_ATTENTION_TENSOR_CORES=0 (then the f32-FMA kernels run every dtype, for comparison).
bool enabled(DType dtype);

void forward(const attention_detail::Problem& p, const Tensor& q, const Tensor& k, const Tensor& v,
             const Tensor& out, const Tensor& lse, cudaStream_t stream);

// delta and lse_use: dense (B, H, T) f32 from the backward row pass.
void backward(const attention_detail::Problem& p, const Tensor& q, const Tensor& k, const Tensor& v,
              const Tensor& grad_out, const float* delta, const float* lse_use,
              const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v,
              cudaStream_t stream);

}  // namespace tessera::kernels::cuda::attention_mma

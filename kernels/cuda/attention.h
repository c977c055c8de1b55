// CUDA fused scaled dot-product attention (flash style: query and key tiles in shared memory, online
// softmax, f32 accumulation, no (T, S) matrix); see kernels/kernels.h for the contract.
#pragma once

#include "core/tensor.h"
#include "kernels/kernels.h"

namespace tessera::kernels::cuda {

// q (B, H, T, D), k and v (B, H, S, D) -> out (B, H, T, D), lse (B, H, T) f32. D in {32, 64, 128}.
void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_padding_mask,
                       const AttentionOptions& opts, const Tensor& out, const Tensor& lse);

// Gradients of sum(grad_out * out) w.r.t. q, k, v (overwritten, not accumulated).
void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& lse, const Tensor& grad_out, const Tensor& key_padding_mask,
                        const AttentionOptions& opts, const Tensor& grad_q, const Tensor& grad_k,
                        const Tensor& grad_v);

}  // namespace tessera::kernels::cuda

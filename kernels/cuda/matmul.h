// CUDA GEMMs through cuBLASLt: the batched matmul of kernels/kernels.h and the fused linear (bias
// and GELU epilogues); f32, f16 and bf16 with f32 compute.
#pragma once

#include "core/tensor.h"
#include "kernels/kernels.h"

namespace tessera::kernels::cuda {

// out (batch..., M, N) = a (batch..., M, K) @ b (batch..., K, N) [+ out if accumulate].
void matmul(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate = false);

// out (M, N) = act(x (M, K) @ w (N, K)^T + bias (N)); bias may be undefined.
void linear(const Tensor& x, const Tensor& w, const Tensor& bias, Activation act, const Tensor& out);

// Whether f32 GEMMs may use TF32 tensor cores (10-bit mantissa products). Off by default, so f32
// results match the CPU's to f32 rounding; process-wide.
void set_allow_tf32(bool allow);
bool allow_tf32();

namespace detail {
// out (M, N) = act(out + bias) in place (any strides; bias (N) contiguous or undefined): the
// epilogue for GEMMs cuBLASLt has no fused algorithm for. Defined in matmul.cu.
void bias_activation(const Tensor& out, const Tensor& bias, Activation act);
}  // namespace detail

}  // namespace tessera::kernels::cuda

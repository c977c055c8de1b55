// CPU fused linear (x @ w^T + bias, then an activation), composed from the CPU matmul and the
// element-wise GELU in f32; the reference the CUDA epilogue GEMM is tested against.
#pragma once

#include "core/tensor.h"
#include "kernels/kernels.h"

namespace tessera::kernels::cpu {

// out (M, N) = act(x (M, K) @ w (N, K)^T + bias (N)); bias may be undefined.
void linear(const Tensor& x, const Tensor& w, const Tensor& bias, Activation act, const Tensor& out);

}  // namespace tessera::kernels::cpu

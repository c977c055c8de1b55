// CPU batched matrix multiply on top of the packed SGEMM (gemm.h); see kernels/kernels.h for the
// contract.
#pragma once

#include "core/tensor.h"

namespace tessera::kernels::cpu {

// out (batch..., M, N) = a (batch..., M, K) @ b (batch..., K, N) [+ out if accumulate] [+ bias],
// a defined bias (N, out's dtype) added to every row as the GEMM stores out (no pass of its own).
void matmul(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate = false,
            const Tensor& bias = Tensor());

}  // namespace tessera::kernels::cpu

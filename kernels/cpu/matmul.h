// CPU batched matrix multiply on top of the packed SGEMM (gemm.h); see kernels/kernels.h for the
// contract.
#pragma once

#include "core/tensor.h"

namespace tessera::kernels::cpu {

// out (batch..., M, N) = a (batch..., M, K) @ b (batch..., K, N) [+ out if accumulate].
void matmul(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate = false);

}  // namespace tessera::kernels::cpu

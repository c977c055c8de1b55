// CUDA dropout with the CPU's counter-based mask (contract: kernels/kernels.h, kernels/dropout_math.h).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace tessera::kernels::cuda {

void dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset, const Tensor& out);

}  // namespace tessera::kernels::cuda

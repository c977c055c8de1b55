// CPU dropout with a counter-based mask (see kernels/kernels.h and kernels/dropout_math.h).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace tessera::kernels::cpu {

void dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset, const Tensor& out);

}  // namespace tessera::kernels::cpu

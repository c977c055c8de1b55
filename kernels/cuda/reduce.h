// CUDA reductions: sum, mean, max, min, argmax, argmin, var and p-norms over any set of dims
// (contract in kernels/kernels.h).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/kernels.h"

namespace tessera::kernels::cuda {

void reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, const Tensor& out,
            double param = 0.0);

}  // namespace tessera::kernels::cuda

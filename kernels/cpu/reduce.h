// CPU reductions: sum, mean, max, min, argmax, argmin, var and p-norms over any set of dims
// (contract in kernels/kernels.h).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/kernels.h"

namespace tessera::kernels::cpu {

void reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, const Tensor& out,
            double param = 0.0);

// The op's name for error messages ("sum", "argmax", ...).
const char* reduce_op_name(ReduceOp op);

}  // namespace tessera::kernels::cpu

// CUDA gather / scatter_add along `dim` (contracts in kernels/kernels.h).
#pragma once

#include "kernels/kernels.h"

namespace tessera::kernels::cuda {

void gather(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out);
void scatter_add(const Tensor& src, int64_t dim, const Tensor& index, const Tensor& out);

}  // namespace tessera::kernels::cuda

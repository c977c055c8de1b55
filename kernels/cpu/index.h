// CPU gather and scatter_add along one dim with torch semantics (see kernels/kernels.h).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace tessera::kernels::cpu {

void gather(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out);
void scatter_add(const Tensor& src, int64_t dim, const Tensor& index, const Tensor& out);

}  // namespace tessera::kernels::cpu

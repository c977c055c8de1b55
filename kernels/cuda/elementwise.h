// CUDA element-wise kernels: unary and binary maps, where and clamp (contracts in kernels/kernels.h).
#pragma once

#include "kernels/kernels.h"

namespace tessera::kernels::cuda {

void unary(UnaryOp op, const Tensor& x, const Tensor& out);
void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out);
void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out);
void clamp(const Tensor& x, double lo, double hi, const Tensor& out);

}  // namespace tessera::kernels::cuda

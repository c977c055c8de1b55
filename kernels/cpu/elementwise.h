// CPU element-wise kernels: unary and binary maps, where and clamp (contracts in kernels/kernels.h).
#pragma once

#include "kernels/kernels.h"

namespace tessera::kernels::cpu {

void unary(UnaryOp op, const Tensor& x, const Tensor& out);
void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out);
void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out);
void clamp(const Tensor& x, double lo, double hi, const Tensor& out);

// The op's name for error messages ("gelu_tanh", "logical_and", ...).
const char* unary_op_name(UnaryOp op);
const char* binary_op_name(BinaryOp op);

}  // namespace tessera::kernels::cpu

// CPU softmax family over the last dim (see kernels/kernels.h for the contract).
#pragma once

#include "core/tensor.h"

namespace tessera::kernels::cpu {

void softmax(const Tensor& x, const Tensor& out);
void log_softmax(const Tensor& x, const Tensor& out);
void softmax_backward(const Tensor& y, const Tensor& grad_y, const Tensor& grad_x);
void log_softmax_backward(const Tensor& y, const Tensor& grad_y, const Tensor& grad_x);

}  // namespace tessera::kernels::cpu

// CUDA softmax, log-softmax and their backwards over the last dim (contracts in kernels/kernels.h).
#pragma once

#include "kernels/kernels.h"

namespace tessera::kernels::cuda {

void softmax(const Tensor& x, const Tensor& out);
void log_softmax(const Tensor& x, const Tensor& out);
void softmax_backward(const Tensor& y, const Tensor& grad_y, const Tensor& grad_x);
void log_softmax_backward(const Tensor& y, const Tensor& grad_y, const Tensor& grad_x);

}  // namespace tessera::kernels::cuda

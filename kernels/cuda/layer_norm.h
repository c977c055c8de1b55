// CUDA layer norm over the last dim, forward and backward (contract: kernels/kernels.h).
#pragma once

#include "core/tensor.h"

namespace tessera::kernels::cuda {

void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                const Tensor& y, const Tensor& mean, const Tensor& rstd);
void layer_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& weight,
                         const Tensor& mean, const Tensor& rstd, const Tensor& grad_x,
                         const Tensor& grad_weight, const Tensor& grad_bias);

}  // namespace tessera::kernels::cuda

// CUDA embedding lookup and its deterministic, atomic-free backward (contract: kernels/kernels.h).
#pragma once

#include "core/tensor.h"

namespace tessera::kernels::cuda {

void embedding(const Tensor& weight, const Tensor& ids, const Tensor& out);
void embedding_backward(const Tensor& grad_out, const Tensor& ids, const Tensor& grad_weight);

}  // namespace tessera::kernels::cuda

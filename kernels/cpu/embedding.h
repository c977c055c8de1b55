// CPU embedding lookup and its deterministic backward (see kernels/kernels.h for the contract).
#pragma once

#include "core/tensor.h"

namespace tessera::kernels::cpu {

void embedding(const Tensor& weight, const Tensor& ids, const Tensor& out);
void embedding_backward(const Tensor& grad_out, const Tensor& ids, const Tensor& grad_weight);

}  // namespace tessera::kernels::cpu

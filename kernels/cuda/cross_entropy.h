// CUDA cross-entropy fused with log-softmax, forward and backward (contract: kernels/kernels.h).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace tessera::kernels::cuda {

void cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                   double label_smoothing, const Tensor& losses, const Tensor& lse);
void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                            const Tensor& grad_losses, int64_t ignore_index, double label_smoothing,
                            const Tensor& grad_logits);

}  // namespace tessera::kernels::cuda

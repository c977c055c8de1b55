// CUDA Adam / AdamW: the per-tensor update and the multi-tensor fused update (contract:
// kernels/kernels.h, math: kernels/adam_math.h).
#pragma once

#include <span>

#include "core/tensor.h"
#include "kernels/kernels.h"

namespace tessera::kernels::cuda {

void adam_update(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                 const Tensor& exp_avg_sq, const AdamStep& step);
void adam_update_multi(std::span<const AdamTensors> tensors, const AdamStep& step);

}  // namespace tessera::kernels::cuda

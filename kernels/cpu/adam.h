// CPU Adam / AdamW update, in place (see kernels/kernels.h and kernels/adam_math.h).
#pragma once

#include <span>

#include "core/tensor.h"
#include "kernels/kernels.h"

namespace tessera::kernels::cpu {

void adam_update(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                 const Tensor& exp_avg_sq, const AdamStep& step);
// Every entry in one parallel region: the tensors are cut into equal tiles shared by the threads.
void adam_update_multi(std::span<const AdamTensors> tensors, const AdamStep& step);

}  // namespace tessera::kernels::cpu

// Initial values of a tensor-parallel shard equal to the same slice of the serial parameter: the
// shard reserves the whole parameter's counters from the generator (so every later draw, on every
// rank, uses the counters it would in the serial model) and draws its own slice at their global
// indices. Padding rows of a padded view are zeros.
#pragma once

#include "core/generator.h"
#include "core/tensor.h"
#include "models/nn/linear.h"
#include "parallel/tensor/placement.h"

namespace tessera::nn {

// A new f32 shard (placement.local_shape()) of a parameter the serial layer draws with
// normal_(whole, mean, std, &gen) / uniform_(whole, low, high, &gen) / zeros.
Tensor normal_shard(const parallel::tensor::Placement& placement, double mean, double std,
                    Generator& gen);
Tensor uniform_shard(const parallel::tensor::Placement& placement, double low, double high,
                     Generator& gen);
Tensor zeros_shard(const parallel::tensor::Placement& placement);

// The serial Linear(spec)'s draws (weight, then bias; the same counters), this rank's pieces by
// the weight's and the bias's placements.
void draw_linear_shards(const LinearSpec& spec, Generator& gen,
                        const parallel::tensor::Placement& weight_placement,
                        const parallel::tensor::Placement& bias_placement, Tensor& weight,
                        Tensor& bias);

}  // namespace tessera::nn

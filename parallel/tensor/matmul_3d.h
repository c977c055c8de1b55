// The 3D linear op (Agarwal et al.'s 3D matmul on the q x q x q cube of cube_3d.h): Y = X W^T with
// X, W and Y each cut in q^3 pieces, as a differentiable op. For rank (i, j, k):
//   x       (..., K / q^2)     the 3D activation layout: batch chunk i, features chunk k q + j
//   weight  (N / q, K / q^2)   rows (output features) chunks k' q + j for every k' (in order),
//                              columns (input features) chunk k q + i (placement_3d.h)
//   y       (..., N / q^2)     the 3D activation layout again: batch chunk i, features k q + j
// Forward: the input group all-gathers x to (..., K / q), the features block k; the weight group
// all-gathers the weight to (N / q, K / q), the same block of input features; the local product
// is block k's share of the output features k' q + j for every k'; the output group
// reduce-scatters it (the sum over the blocks k), each rank keeping its chunk k' = k. Each of the
// three is a region op (region_ops.h), so the backward is their conjugates, always run on every
// rank: the output group all-gathers dY, dX is reduce-scattered over the input group and dW over
// the weight group (each summing the ranks that used the gathered piece).
// With fused_blocks f (attention's q | k | v), every block of N / f output features is cut so, and
// y holds chunk k q + j of each block, blocks in order.
// Communication per call and rank, with x, w and y the bytes of the gathered input (..., K / q),
// the gathered weight (N / q, K / q) and the local product (..., N / q):
//   forward   input: all-gather to x;  weight: all-gather to w;  output: reduce-scatter of y
//   backward  output: all-gather to y;  input: reduce-scatter of x (when x requires grad);
//             weight: reduce-scatter of w (when the weight requires grad)
// each moving (q - 1) / q of those bytes. A cube of one rank computes the serial product.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "parallel/tensor/cube_3d.h"

namespace tessera::parallel::tensor {

Tensor linear_3d(const Tensor& x, const Tensor& weight, const Cube3D& cube,
                 int64_t fused_blocks = 1);

}  // namespace tessera::parallel::tensor

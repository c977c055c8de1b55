// Where the parameters of the 3D layers live on the q x q x q cube (cube_3d.h), as Placements, so
// gather_full rebuilds the serial tensor and shard_init draws each piece at its global indices.
// For rank (i, j, k):
//   weight (out, in)  the view (q, q, out / q^2, in): rows chunks k' q + j for every k' (dim 1
//   split
//                     over "3d_input"), columns chunk k q + i (dim 3 split over "3d_output", then
//                     nested over "3d_weight"): local (out / q, in / q^2), what linear_3d takes.
//                     With f fused blocks the view is (f, q, q, out / (f q^2), in), each block cut
//                     so.
//   vector (n)        biases and LayerNorm weights: chunk (k q + j) q + i of n / q^3 (dim 0 split
//                     over "3d_output", nested over "3d_input", nested over "3d_weight"): the
//                     weight group all-gathers it to the rank's feature chunk k q + j (n / q^2).
//                     With f fused blocks, the view (f, n / f) split so along dim 1.
// Every rank holds 1/q^3 of every parameter: nothing is replicated.
#pragma once

#include <cstdint>

#include "core/shape.h"
#include "parallel/tensor/cube_3d.h"
#include "parallel/tensor/placement.h"

namespace tessera::parallel::tensor {

// `op` names the layer in the divisibility errors.
Placement weight_placement_3d(const Shape& shape, const CubeCoords& at, const char* op,
                              int64_t fused_blocks = 1);
Placement vector_placement_3d(int64_t n, const CubeCoords& at, const char* op,
                              int64_t fused_blocks = 1);

// The rank's feature chunk (n / q^2, every fused block's chunk in order) of a vector parameter
// from its shard (n / q^3): an all-gather over the weight group, whose backward reduce-scatters
// there (summing the gradients of the q batch chunks).
Tensor gather_vector_3d(const Tensor& shard, const Cube3D& cube, int64_t fused_blocks = 1);

}  // namespace tessera::parallel::tensor

// Where the parameters of the 2D (SUMMA) layers live on the q x q grid (parallel/tensor/summa.h),
// Colossal-AI's 2D layouts, as Placements (so gather_full rebuilds the serial tensor):
//   weight (out, in)  rank (grid row r, column s) holds rows (out) chunk s, columns (in) chunk r:
//                     the block [r][s] of W^T (in, out), SUMMA's right operand in Y = X W^T. Split
//                     dim 0 over "2d_row" (indexed by the grid column), dim 1 over "2d_col" (row).
//   vector (n)        biases and LayerNorm weights: rank (r, s) holds [s n/q + r n/q^2, + n/q^2),
//                     the grid column's chunk of the features cut again over the column group. The
//                     view (q, q, n / q^2) split dim 0 over "2d_row" and dim 1 over "2d_col".
// Every rank holds 1/q^2 of every parameter: nothing is replicated.
#pragma once

#include "core/tensor.h"
#include "parallel/tensor/placement.h"
#include "parallel/tensor/summa.h"

namespace tessera::nn {

// `op` names the layer in the divisibility errors.
parallel::tensor::Placement weight_placement_2d(const Shape& shape,
                                                const parallel::tensor::SummaGrid& grid,
                                                const char* op);
parallel::tensor::Placement vector_placement_2d(int64_t n, const parallel::tensor::SummaGrid& grid,
                                                const char* op);

// The grid column's chunk (n / q) of a vector parameter from this rank's shard (n / q^2): an
// all-gather over the column group, whose backward reduce-scatters there (summing the gradients
// of the grid column's batch chunks).
Tensor gather_vector_2d(const Tensor& shard, const parallel::tensor::SummaGrid& grid);

}  // namespace tessera::nn

// Where the parameters of the 2D (SUMMA) layers live on the q x q grid (parallel/tensor/summa.h),
// Colossal-AI's 2D layouts, as Placements (so gather_full rebuilds the serial tensor):
//   weight (out, in)  rank (grid row r, column s) holds rows (out) chunk s, columns (in) chunk r:
//                     the block [r][s] of W^T (in, out), SUMMA's right operand in Y = X W^T. Split
//                     dim 0 over "2d_row" (indexed by the grid column), dim 1 over "2d_col" (row).
//                     With k fused blocks (q | k | v) the rows are cut within each block: the view
//                     (k, out / k, in) split along dims 1 and 2, so chunk s of every block.
//   vector (n)        biases and LayerNorm weights: rank (r, s) holds [s n/q + r n/q^2, + n/q^2),
//                     the grid column's chunk of the features cut again over the column group:
//                     dim 0 split over "2d_row", then (nested) over "2d_col". With k fused blocks,
//                     the view (k, n / k) split so along dim 1.
//   columns (m, n)    a table or weight whose columns (features) are cut as a vector and whose
//                     rows are whole (2D embeddings' tables, the classifier's weight).
// Every rank holds 1/q^2 of every parameter: nothing is replicated. Under 2.5D the same blocks over
// each depth layer's grid ("2.5d_row", "2.5d_col"), every block repeated on the d layers: the
// placements name "2.5d_dep" as a replica group (placement.h: the norm counts depth 0's copy) and
// the layers sum the gradients over it (depth_replica, summa.h).
#pragma once

#include "core/tensor.h"
#include "models/nn/dropout.h"
#include "parallel/tensor/placement.h"
#include "parallel/tensor/summa.h"

namespace tessera::nn {

// `op` names the layer in the divisibility errors.
parallel::tensor::Placement weight_placement_2d(const Shape& shape,
                                                const parallel::tensor::SummaGrid& grid,
                                                const char* op, int64_t fused_blocks = 1);
parallel::tensor::Placement vector_placement_2d(int64_t n, const parallel::tensor::SummaGrid& grid,
                                                const char* op, int64_t fused_blocks = 1);
parallel::tensor::Placement columns_placement_2d(const Shape& shape,
                                                 const parallel::tensor::SummaGrid& grid,
                                                 const char* op);
// `p` with the grid's depth group as its replica group (2.5D; `p` itself in 2D).
parallel::tensor::Placement over_depth(parallel::tensor::Placement p,
                                       const parallel::tensor::SummaGrid& grid);

// The grid column's chunk (n / q) of a vector parameter from this rank's shard (n / q^2): an
// all-gather over the column group, whose backward reduce-scatters there (summing the gradients
// of the grid column's batch chunks, and over the depth layers under 2.5D). Fused: chunk s of each
// block, blocks in order.
Tensor gather_vector_2d(const Tensor& shard, const parallel::tensor::SummaGrid& grid,
                        int64_t fused_blocks = 1);
// The same for a columns placement: (m, n / q^2) -> (m, n / q), the grid column's features.
Tensor gather_columns_2d(const Tensor& shard, const parallel::tensor::SummaGrid& grid);

// This rank's block (B / q, ..., C / q) of the serial residual stream (B, ..., C), for Dropout
// (2.5D: batch chunk batch_index() of d q).
DropoutChunk dropout_chunk_2d(const parallel::tensor::SummaGrid& grid);

}  // namespace tessera::nn

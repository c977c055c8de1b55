// 2D tensor parallelism (SUMMA, as Optimus and Colossal-AI's 2D mode): matrix products of matrices
// cut in q x q blocks over a grid of P = q^2 ranks, as differentiable ops, and the activation
// layout those products assume.
//
// Layout. Every matrix X (R, S) lives as blocks: the rank at grid (row r, column s) holds X[r][s],
// rows chunk r (of R / q) and columns chunk s (of S / q). For the left operand and the result the
// "rows" are every dim but the last: an activation (B, T, C) is cut along B by grid row and along C
// by grid column, so rank (r, s) holds (B / q, T, C / q) (Colossal-AI's 2D layout: batch by the
// column group's rank, hidden by the row group's rank). T is never cut, so it may be anything.
//
// Algorithm: SUMMA by q broadcast steps (van de Geijn and Watts), not an all-gather of a whole grid
// row or column (which moves as many bytes but holds q blocks at once): a rank holds at most two
// received blocks of an operand at a time (the current step and the prefetched next one), so the
// activation memory stays about 1/q^2 of the serial one. Per call and per rank, with a, b, c the
// bytes of this rank's blocks of A, B and C ("row" / "column": this rank's grid row / column
// group):
//   summa_ab   C = A B     row: q broadcasts of a;  column: q broadcasts of b
//   summa_abt  C = A B^T   column: q broadcasts of b;  row: q reduces of c
//   summa_atb  C = A^T B   row: q broadcasts of a;  column: q reduces of c
// Each step has one root per group (grid column / row i at step i), so over the q steps a rank is
// root once: a broadcast group's rank sends its own block once and receives q - 1 blocks; a reduce
// group's rank sends q - 1 partial blocks and receives one (the counters of comm_types.h).
// The backward of each op is the other two: ab: dA = abt(dC, B), dB = atb(A, dC);
// abt: dA = ab(dC, B), dB = atb(dC, A); atb: dA = abt(B, dC), dB = ab(A, dC) (so under create_graph
// the backward is itself recorded). A gradient nobody needs is not computed; every rank of the grid
// runs the same graph, so every rank skips the same collectives.
//
// Rules, as for the region ops (region_ops.h): every rank of the grid calls the same ops in the
// same order with equal block shapes and one dtype; tensors live on the groups' device type (CPU
// for MPI); each call returns when its collectives are done; the backward nodes always run on every
// rank (zeros when no gradient reached them). A grid of one rank (q = 1) computes the serial
// product.
#pragma once

#include "core/tensor.h"
#include "parallel/tensor/region_ops.h"

namespace tessera::parallel::tensor {

// The q x q grid as this rank sees it. `row`: the ranks of this rank's grid row (ParallelContext
// group "2d_row": same row, every column; its group rank is this rank's column). `col`: the ranks
// of its grid column ("2d_col"; group rank = its row). Both of size q.
struct SummaGrid {
  CommPtr row;
  CommPtr col;

  int q() const { return row ? row->size() : 1; }
  int grid_row() const { return col ? col->rank() : 0; }
  int grid_col() const { return row ? row->rank() : 0; }
  // Throws unless both groups exist with the same size and one device type (`op` names the caller).
  void check(const char* op) const;
};

// A (..., m, k) block [r][l], B (k, n) block [l][s] -> C (..., m, n) block [r][s]: C = A B.
Tensor summa_ab(const Tensor& a, const Tensor& b, const SummaGrid& grid);
// A (..., m, n) block [r][s], B (k, n) block [l][s] -> C (..., m, k) block [r][l]: C = A B^T.
Tensor summa_abt(const Tensor& a, const Tensor& b, const SummaGrid& grid);
// A (..., m, k) block [r][l], B (..., m, n) block [r][s] -> C (k, n) block [l][s]: C = A^T B,
// summed over every row (the leading dims and m).
Tensor summa_atb(const Tensor& a, const Tensor& b, const SummaGrid& grid);

// The 2D activation layout from and to a tensor every rank holds whole (as region ops, so a test or
// a model boundary can feed the serial input and read the serial output):
// split_2d: x (B, ..., C) -> this rank's block (B / q, ..., C / q); backward: the gradient blocks
// all-gathered (over the row group along C, then the column group along B), whole on every rank.
Tensor split_2d(const Tensor& x, const SummaGrid& grid);
// gather_2d: the blocks (B / q, ..., C / q) -> x (B, ..., C) on every rank; backward: this rank's
// block of the gradient (which must be the same on every rank, as for gather_from_region).
Tensor gather_2d(const Tensor& x, const SummaGrid& grid);

}  // namespace tessera::parallel::tensor

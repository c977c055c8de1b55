// 2D tensor parallelism (SUMMA, as Optimus and Colossal-AI's 2D mode): matrix products of matrices
// cut in q x q blocks over a grid of P = q^2 ranks, as differentiable ops, and the activation
// layout those products assume. 2.5D (Tesseract, Colossal-AI's 2.5D mode) is the same grid stacked
// d deep (P = d q^2): every depth layer runs these products on its own slice of the batch with the
// same weight blocks, which are replicated over the depth layers (2D is 2.5D with depth 1).
//
// Layout. Every matrix X (R, S) lives as blocks: the rank at grid (row r, column s) holds X[r][s],
// rows chunk r (of R / q) and columns chunk s (of S / q). For the left operand and the result the
// "rows" are every dim but the last: an activation (B, T, C) is cut along B by grid row and along C
// by grid column, so rank (r, s) holds (B / q, T, C / q) (Colossal-AI's 2D layout: batch by the
// column group's rank, hidden by the row group's rank). T is never cut, so it may be anything.
// Under 2.5D the batch is cut over the depth layers first, then over the grid rows: rank
// (depth l, row r, column s) holds batch chunk l q + r of d q, (B / (d q), T, C / q).
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

#include <string>

#include "core/tensor.h"
#include "parallel/tensor/region_ops.h"

namespace tessera::parallel::tensor {

// The q x q grid as this rank sees it. `row`: the ranks of this rank's grid row (ParallelContext
// group "2d_row": same row, every column; its group rank is this rank's column). `col`: the ranks
// of its grid column ("2d_col"; group rank = its row). Both of size q. Under 2.5D both lie inside
// this rank's depth layer ("2.5d_row", "2.5d_col") and two more groups exist: `dep`, the ranks at
// this grid position on every depth layer ("2.5d_dep"; group rank = the depth), and `batch`, the
// ranks holding the same features of every batch chunk: this grid column on every layer
// ("2.5d_xz"; group rank = depth * q + row, the batch chunk). Both null in 2D, where the batch is
// cut over `col` alone.
struct SummaGrid {
  CommPtr row;
  CommPtr col;
  CommPtr dep = nullptr;
  CommPtr batch = nullptr;

  int q() const { return row ? row->size() : 1; }
  int grid_row() const { return col ? col->rank() : 0; }
  int grid_col() const { return row ? row->rank() : 0; }
  int depth() const { return dep ? dep->size() : 1; }
  int depth_index() const { return dep ? dep->rank() : 0; }
  // The batch's chunks (d q) and this rank's (depth * q + grid row), over batch_group().
  int batch_parts() const { return depth() * q(); }
  int batch_index() const { return depth_index() * q() + grid_row(); }
  const CommPtr& batch_group() const { return batch ? batch : col; }
  // Throws unless both groups exist with the same size and one device type, and dep and batch
  // (when given) are the d and d q ranks that stack this grid (`op` names the caller).
  void check(const char* op) const;
};

// What a batch must divide by, for errors: "the 2D grid side q = 2 (2D tensor parallelism splits
// the batch over the grid rows)" or "depth x q = 2 x 2 = 4 (2.5D tensor parallelism splits the
// batch over the 2 depth layers, then the 2 grid rows)".
std::string batch_split_text(const SummaGrid& grid);

// A parameter replicated over the depth layers, as a layer uses it: forward x itself, backward the
// gradient summed over `dep` (each layer saw its own slice of the batch, so the serial gradient is
// the sum of the layers'). The identity in 2D.
Tensor depth_replica(const Tensor& x, const SummaGrid& grid);

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
// all-gathered (over the row group along C, then the batch group along B), whole on every rank.
// (2.5D: B / (d q) rows, chunk batch_index().)
Tensor split_2d(const Tensor& x, const SummaGrid& grid);
// gather_2d: the blocks (B / q, ..., C / q) -> x (B, ..., C) on every rank; backward: this rank's
// block of the gradient (which must be the same on every rank, as for gather_from_region).
Tensor gather_2d(const Tensor& x, const SummaGrid& grid);

}  // namespace tessera::parallel::tensor

// 3D tensor parallelism (Agarwal et al.'s 3D matmul, Colossal-AI's 3D mode): the q x q x q cube of
// P = q^3 ranks as a layer sees it, and the activation layout every 3D layer takes and gives.
//
// Cube. A rank sits at (i, j, k) with tensor rank t = k q^2 + j q + i
// (parallel/mesh/group_layout.h) and belongs to three groups of q ranks, each varying one
// coordinate:
//   input   "3d_input"   varies j  (group rank j)  X is all-gathered here
//   weight  "3d_weight"  varies i  (group rank i)  W is all-gathered here
//   output  "3d_output"  varies k  (group rank k)  Y is reduce-scattered here
//
// Activation layout. A tensor (B, ..., C) is cut along B in q chunks and along C in q^2 chunks;
// rank (i, j, k) holds batch chunk i and feature chunk k q + j:  (B / q, ..., C / q^2), 1/q^3 of
// it. The features of one k form the contiguous block k (C / q), spread over the input group, so
// the input group's all-gather gives a rank that block; a batch chunk's features all lie on the (j,
// k) plane of one i (LayerNorm's statistics are reduced over the input, then the output group).
// linear_3d (matmul_3d.h) gives its output in this same layout, so layers chain with no re-layout
// (Colossal-AI's 3D instead swaps the input and output groups after every linear).
#pragma once

#include <memory>

#include "core/tensor.h"
#include "parallel/mesh/parallel_context.h"
#include "parallel/tensor/region_ops.h"

namespace tessera::parallel::tensor {

// This rank's coordinates on a cube of side q, without the groups (placements are pure functions
// of them, tested without MPI).
struct CubeCoords {
  int q = 1;
  int i = 0;  // batch chunk; rank in the weight group
  int j = 0;  // rank in the input group
  int k = 0;  // rank in the output group

  // The feature chunk (of q^2) this rank holds in the activation layout.
  int feature_chunk() const { return k * q + j; }
};

struct Cube3D {
  CommPtr input;
  CommPtr weight;
  CommPtr output;

  int q() const { return input ? input->size() : 1; }
  CubeCoords coords() const {
    if (!input) return {};
    return {.q = q(), .i = weight->rank(), .j = input->rank(), .k = output->rank()};
  }
  // Throws unless all three groups exist (or none) with one size and one device type.
  void check(const char* op) const;
};

// The cube of a tensor-parallel context in mode 3d: its groups "3d_input", "3d_weight" and
// "3d_output". Throws unless the context is tensor-parallel in mode 3d.
Cube3D cube_3d(const ParallelContext& context);

// The 3D activation layout from and to a tensor every rank holds whole (region ops, so a test or a
// model boundary can feed the serial input and read the serial output):
// split_3d: x (B, ..., C) -> this rank's (B / q, ..., C / q^2); backward: the gradient pieces
// all-gathered, whole on every rank. Needs B divisible by q and C by q^2.
Tensor split_3d(const Tensor& x, const Cube3D& cube);
// gather_3d: the pieces (B / q, ..., C / q^2) -> x (B, ..., C) on every rank; backward: this
// rank's piece of the gradient (which must be the same on every rank, as for gather_from_region).
Tensor gather_3d(const Tensor& x, const Cube3D& cube);

}  // namespace tessera::parallel::tensor

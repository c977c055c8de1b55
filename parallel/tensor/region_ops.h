// Tensor-parallel region ops: differentiable collectives over a communicator (the tensor group, or
// a 2D/2.5D/3D row/column group), in conjugate pairs: the forward of one is the backward of the
// other (Megatron's copy / reduce / scatter / gather; an all-to-all's is the all-to-all back).
// Their backward nodes always run on every rank, with zero gradients when none arrived, so no rank
// leaves its group waiting (Node::always_run, autograd/engine.cc). A null communicator or a group
// of one is the identity (x itself, no node). Every rank of `group` must call the same ops in the
// same order with the same shapes and dtype; x lives on the group's device type (CPU for MPI);
// each call blocks until its collective is done. Under create_graph the backward is recorded (it
// is the conjugate op).
#pragma once

#include <memory>

#include "core/tensor.h"
#include "parallel/comm/communicator.h"

namespace tessera::parallel::tensor {

using CommPtr = std::shared_ptr<Communicator>;

// Forward: x itself (a new handle on x's storage). Backward: all-reduce (sum) of the gradient over
// `group`. Enters a region whose ranks each compute part of a result from the same x
// (column-parallel linear input).
Tensor copy_to_region(const Tensor& x, const CommPtr& group);
// Forward: all-reduce (sum) over `group`, into a new tensor. Backward: the gradient itself, so the
// downstream computation (and its gradient) must be the same on every rank (row-parallel output).
Tensor reduce_from_region(const Tensor& x, const CommPtr& group);
// Forward: this rank's chunk of x along `dim` (size divisible by the group). Backward: all-gather
// of the gradient chunks along `dim`.
Tensor scatter_to_region(const Tensor& x, int64_t dim, const CommPtr& group);
// Forward: all-gather of the ranks' chunks along `dim` (rank order). Backward: this rank's chunk of
// the gradient (which, as for reduce_from_region, must be the same on every rank).
Tensor gather_from_region(const Tensor& x, int64_t dim, const CommPtr& group);
// Forward: reduce-scatter along `dim` (the sum of every rank's x, this rank's chunk). Backward:
// all-gather along `dim` (Megatron's sequence-parallel pair with all_gather_to_region).
Tensor reduce_scatter_to_region(const Tensor& x, int64_t dim, const CommPtr& group);
// Forward: all-gather along `dim`. Backward: reduce-scatter along `dim`.
Tensor all_gather_to_region(const Tensor& x, int64_t dim, const CommPtr& group);
// Forward: all-to-all: x's chunks along `split_dim` (its size divisible by the group) go to the
// ranks in order, chunk r to rank r, and the chunks received are joined along `concat_dim` in rank
// order. Backward: the all-to-all back (split along concat_dim, join along split_dim). It moves
// (p-1)/p of x, where an all-gather along concat_dim that keeps this rank's chunk of split_dim
// moves p times as much (3D's token embedding, models/nn/parallel/vocab_3d.h).
Tensor all_to_all_to_region(const Tensor& x, int64_t split_dim, int64_t concat_dim,
                            const CommPtr& group);

}  // namespace tessera::parallel::tensor

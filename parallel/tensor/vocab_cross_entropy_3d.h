// Vocab-parallel cross-entropy on the 3D cube (cube_3d.h): the logits (B, ..., V) live in the 3D
// activation layout, rank (i, j, k) holding batch chunk i's logits of vocabulary chunk k q + j
// (what linear_3d gives for an LM head), so the (j, k) plane of one i holds every slice of its
// batch chunk. The plane group (plane_group_3d) computes that chunk's loss by the 1D vocab-parallel
// cross-entropy (vocab_cross_entropy.h: per-row statistics, the logits never gathered) and the
// weight group (varying i) adds the chunks. Same semantics as cross_entropy.
#pragma once

#include "autograd/ops.h"
#include "core/tensor.h"
#include "parallel/tensor/cube_3d.h"
#include "parallel/tensor/vocab_cross_entropy.h"

namespace tessera::parallel::tensor {

// The q^2 ranks of this rank's (j, k) plane (same i), ranked by the feature chunk k q + j: split
// from `tensor_group` (the cube's P = q^3 ranks), so every rank of it must call this together.
CommPtr plane_group_3d(const CommPtr& tensor_group, const Cube3D& cube);

// The vocabulary slice of feature chunk k q + j: V / q^2 ids. Needs V divisible by q^2 (no
// padding: the LM head's weight is cut as a Linear3D's, parallel/tensor/placement_3d.h).
VocabShard vocab_shard_3d(int64_t vocab_size, const CubeCoords& at, const char* op);

// local_logits (B / q, ..., V / q^2): this rank's piece; targets (B, ...) i64/i32, the whole
// batch's, the same on every rank. Every rank gets the whole batch's loss ("none": the (B, ...)
// losses); the logits' gradient is this rank's piece. Communication: the 1D op's plane statistics
// on this rank's rows, then one all-reduce of a scalar over the weight group ("none": an
// all-gather of the chunk's losses).
Tensor vocab_parallel_cross_entropy_3d(const Tensor& local_logits, const Tensor& targets,
                                       const VocabShard& shard, const CrossEntropyOptions& opts,
                                       const Cube3D& cube, const CommPtr& plane);

}  // namespace tessera::parallel::tensor

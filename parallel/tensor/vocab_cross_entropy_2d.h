// Vocab-parallel cross-entropy on the 2D (SUMMA) grid (summa.h): the logits of a batch live as
// blocks, rank (grid row r, column s) holding batch chunk r's logits of vocabulary slice s, so a
// grid row holds every slice of its batch chunk. The row group computes that chunk's loss by the
// 1D vocab-parallel cross-entropy (vocab_cross_entropy.h: per-row statistics, the logits never
// gathered) and the column group adds the chunks. Under 2.5D (summa.h) the batch chunks of every
// depth layer are added over the batch group ("2.5d_xz") instead, so the mean is the whole
// batch's. Same semantics as cross_entropy.
#pragma once

#include "autograd/ops.h"
#include "core/tensor.h"
#include "parallel/tensor/summa.h"
#include "parallel/tensor/vocab_cross_entropy.h"

namespace tessera::parallel::tensor {

// local_logits (B / q, ..., shard.local): this rank's block (2.5D: B / (d q) rows), shard =
// vocab_shard(V, grid column, q, multiple) (its slice of the padded vocabulary). targets (B, ...)
// i64/i32: the whole batch's global ids (or opts.ignore_index), the same on every rank of the grid.
// Every rank gets the whole batch's loss ("none": the (B, ...) losses); the logits' gradient is
// this rank's block. Communication: the 1D op's row-group statistics on this rank's rows, then one
// all-reduce of a scalar over the batch group ("none": an all-gather of the chunk's losses).
Tensor vocab_parallel_cross_entropy_2d(const Tensor& local_logits, const Tensor& targets,
                                       const VocabShard& shard, const CrossEntropyOptions& opts,
                                       const SummaGrid& grid);

}  // namespace tessera::parallel::tensor

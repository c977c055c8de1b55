// Vocab-parallel cross-entropy (Megatron's): each rank of the tensor group holds the logits of one
// contiguous slice of the padded vocabulary, and the loss is computed from per-row statistics
// agreed over the group, so the (N, V) logits are never gathered. Same semantics as cross_entropy
// (autograd/ops.h): ignore_index, label smoothing over the true vocabulary, mean/sum/none.
#pragma once

#include <cstdint>
#include <memory>

#include "autograd/ops.h"
#include "core/tensor.h"
#include "parallel/comm/communicator.h"

namespace tessera::parallel::tensor {

// This rank's slice of a vocabulary padded to a multiple of the split. Ids in
// [vocab_size, padded_vocab_size) are padding: their logits never count.
struct VocabShard {
  int64_t vocab_size = 0;         // the true vocabulary size V
  int64_t padded_vocab_size = 0;  // V rounded up to a multiple of size * multiple
  int64_t start = 0;              // first global id of this rank's slice
  int64_t local = 0;              // width of every rank's slice: padded_vocab_size / size

  // How many ids of the slice are real (not padding): [start, start + valid()). May be 0 when the
  // padding is wider than a slice.
  int64_t valid() const;
};

// Rank `rank` of `size`: the vocabulary padded to ceil(V / (size * multiple)) * size * multiple,
// cut into `size` equal contiguous slices in rank order. Pure arithmetic, no communication.
VocabShard vocab_shard(int64_t vocab_size, int rank, int size, int64_t multiple = 1);

// local_logits (N, shard.local) or (B, T, shard.local): this rank's slice of the logits, any
// floating dtype (the math runs in f32; the loss is f32). targets (N) or (B, T), i64 or i32, global
// ids in [0, shard.vocab_size) or opts.ignore_index, the same on every rank of `group`. Every rank
// of the group gets the whole loss; the logits' gradient is this rank's slice (0 on padding).
// Forward: an all-reduce (max) and one all-reduce (sum) of per-row statistics, N and 2N or 3N
// floats; backward: none. A null group or a group of one is cross_entropy on the unpadded columns
// (shard.start must then be 0).
Tensor vocab_parallel_cross_entropy(const Tensor& local_logits, const Tensor& targets,
                                    const VocabShard& shard, const CrossEntropyOptions& opts = {},
                                    const std::shared_ptr<Communicator>& group = nullptr);

}  // namespace tessera::parallel::tensor

// The models' side of sequence parallelism (see sequence_shard.h).
#include "models/nn/sequence_shard.h"

#include "autograd/ops.h"
#include "core/error.h"
#include "core/factory.h"
#include "parallel/tensor/region_ops.h"

namespace tessera::nn {

namespace seq = parallel::sequence;

SequenceShard::SequenceShard(const BuildContext& ctx) {
  const parallel::ParallelContext* p = ctx.parallel();
  if (!p || p->config().sequence <= 1) return;
  size_ = p->config().sequence;
  rank_ = p->sequence_group()->rank();
  group_ = p->sequence_group();
  mode_ = seq::parse_mode(p->config().sequence_mode);
}

void SequenceShard::check_length(const char* who, int64_t t) const {
  if (!on()) return;
  TS_CHECK(t % size_ == 0, who, "expected the sequence length ", t,
           " divisible by parallel.sequence ", size_, " (each rank holds T / ", size_,
           " positions)");
}

Tensor SequenceShard::take(const Tensor& full, int64_t dim) const {
  if (!on()) return full;
  check_length("sequence parallel", full.size(dim));
  return seq::shard_sequence(full, dim, seq::SequenceLayout::contiguous, size_, rank_);
}

Tensor SequenceShard::positions(int64_t t, Device device) const {
  const int64_t n = on() ? t / size_ : t, first = on() ? rank_ * n : 0;
  return arange(double(first), double(first + n), 1.0, {.dtype = DType::i64, .device = device});
}

seq::SequenceAttentionArgs SequenceShard::attention_args() const {
  seq::SequenceAttentionArgs args;
  args.mode = mode_;
  args.group = group_;
  args.layout = seq::SequenceLayout::contiguous;
  return args;
}

Tensor SequenceShard::first_token(const Tensor& local) const {
  TS_CHECK(local.defined() && local.dim() == 3 && local.size(1) >= 1, "SequenceShard.first_token",
           "expected tokens (B, T/S >= 1, C), got ",
           local.defined() ? local.describe() : "undefined");
  const Tensor row = select(local, 1, 0);  // (B, C)
  if (!on()) return row;
  // Every rank contributes (rank 0 its row, the others zeros tied to their shard), so the
  // collectives' backward nodes exist, and run, on every rank.
  namespace tp = parallel::tensor;
  return tp::copy_to_region(tp::reduce_from_region(mul(row, rank_ == 0 ? 1.0 : 0.0), group_),
                            group_);
}

Tensor SequenceShard::mean_share(const Tensor& local_sum, int64_t local_count) const {
  if (!on()) return div(local_sum, double(local_count));
  Tensor count = full({1}, double(local_count), {.dtype = DType::i64});
  group_->all_reduce(count)->wait();
  const int64_t total = count.data<int64_t>()[0];
  TS_CHECK(total > 0, "SequenceShard.mean_share",
           "expected at least one counted token in the whole sequence, got none over the ", size_,
           " ranks");
  return mul(local_sum, double(size_) / total);
}

}  // namespace tessera::nn

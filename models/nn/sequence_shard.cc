// The models' side of sequence parallelism (see sequence_shard.h).
#include "models/nn/sequence_shard.h"

#include <vector>

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
  mode_ = p->config().sequence_mode;
  layout_ = p->config().layout();
}

int64_t SequenceShard::multiple() const {
  if (!on()) return 1;
  return layout_ == seq::SequenceLayout::zigzag ? 2 * int64_t(size_) : size_;
}

void SequenceShard::check_length(const char* who, int64_t t) const {
  if (!on()) return;
  TS_CHECK(t % multiple() == 0, who, "expected the sequence length ", t, " divisible by ",
           layout_ == seq::SequenceLayout::zigzag ? "2 x " : "", "parallel.sequence ", size_,
           " (each rank holds T / ", size_, " positions",
           layout_ == seq::SequenceLayout::zigzag ? ", in two chunks of the zigzag layout" : "", ")");
}

Tensor SequenceShard::take(const Tensor& full, int64_t dim) const {
  if (!on()) return full;
  check_length("sequence parallel", full.size(dim));
  return seq::shard_sequence(full, dim, layout_, size_, rank_);
}

Tensor SequenceShard::positions(int64_t t, Device device) const {
  if (!on()) return arange(0.0, double(t), 1.0, {.dtype = DType::i64, .device = device});
  std::vector<Tensor> parts;
  for (const seq::Segment& s : seq::rank_segments(layout_, t, size_, rank_))
    parts.push_back(arange(double(s.global), double(s.global_end()), 1.0,
                           {.dtype = DType::i64, .device = device}));
  return parts.size() == 1 ? parts[0] : cat(parts, 0);
}

Tensor SequenceShard::gather(const Tensor& local, int64_t dim) const {
  if (!on()) return local;
  TS_CHECK(dim >= 0 && dim < local.dim(), "SequenceShard.gather", "expected a dim in [0, ",
           local.dim(), "), got ", dim);
  const Tensor mine = local.contiguous();
  Tensor all = empty({size_ * mine.numel()}, {.dtype = mine.dtype(), .device = mine.device()});
  group_->all_gather(mine, all)->wait();
  // (S, ...) in rank order: move the rank axis next to dim, merge, then back to serial order.
  Shape stacked{size_};
  for (int64_t d : mine.shape()) stacked.push_back(d);
  Tensor ranks = reshape(all, stacked);  // (S, d0, .., d_dim, ..)
  std::vector<int64_t> order;
  for (int64_t d = 1; d <= dim; ++d) order.push_back(d);
  order.push_back(0);
  for (int64_t d = dim + 1; d <= mine.dim(); ++d) order.push_back(d);
  Shape merged = mine.shape();
  merged[size_t(dim)] *= size_;
  return seq::from_layout(reshape(permute(ranks, order), merged), dim, layout_, size_);
}

DropoutChunk SequenceShard::dropout_chunk() const {
  if (layout_ == seq::SequenceLayout::zigzag)
    return {.dim = 1, .parts = 2 * size_, .index = rank_, .second_index = 2 * size_ - 1 - rank_};
  return {.dim = 1, .parts = size_, .index = rank_};
}

seq::SequenceAttentionArgs SequenceShard::attention_args() const {
  seq::SequenceAttentionArgs args;
  args.mode = mode_;
  args.group = group_;
  args.layout = layout_;
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

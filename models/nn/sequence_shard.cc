// The models' side of sequence parallelism (see sequence_shard.h).
#include "models/nn/sequence_shard.h"

#include "autograd/ops.h"
#include "core/error.h"
#include "core/factory.h"

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

}  // namespace tessera::nn

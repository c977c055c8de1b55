// Sequence split of the 1D tensor group (see sequence_1d.h).
#include "models/nn/parallel/sequence_1d.h"

#include "core/error.h"
#include "parallel/tensor/region_ops.h"

namespace tessera::nn {

SequenceSplit::SequenceSplit(const BuildContext& ctx) {
  if (!ctx.sequence_parallel()) return;
  group_ = ctx.tensor_group();
  parts_ = ctx.tensor_size();
  index_ = ctx.tensor_rank();
}

void SequenceSplit::check_length(const char* who, int64_t t) const {
  TS_CHECK(t % parts_ == 0, who, "expected the sequence length T ", t,
           " divisible by parallel.tensor.size ", parts_,
           " (parallel.tensor.sequence_parallel splits T over the tensor group)");
}

Tensor SequenceSplit::scatter(const Tensor& x, int64_t dim) const {
  return on() ? parallel::tensor::scatter_to_region(x, dim, group_) : x;
}

Tensor SequenceSplit::replicate(const Tensor& x) const {
  return on() ? parallel::tensor::copy_to_region(x, group_) : x;
}

Tensor SequenceSplit::gather(const Tensor& x, int64_t dim) const {
  return on() ? parallel::tensor::gather_from_region(x, dim, group_) : x;
}

}  // namespace tessera::nn

// Gathering and cutting shards (see placement_ops.h).
#include "parallel/tensor/placement_ops.h"

#include "autograd/grad_mode.h"
#include "core/factory.h"

namespace tessera::parallel::tensor {
namespace {

// t with dimension `from` moved to position `to` (a permuted view).
Tensor movedim(const Tensor& t, int64_t from, int64_t to) {
  std::vector<int64_t> order;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (d != from) order.push_back(d);
  order.insert(order.begin() + to, from);
  return t.permute(order);
}

}  // namespace

Tensor gather_full(const Tensor& shard, const Placement& placement, const ParallelContext& context) {
  if (placement.replicated()) return shard;
  autograd::NoGradGuard no_grad;
  TS_CHECK(shard.shape() == placement.local_shape(), "gather_full", "expected a shard of shape ",
           shape_str(placement.local_shape()), " (", placement.describe(), "), got ",
           shard.describe());
  Tensor t = shard.contiguous().reshape(placement.local_view());
  // Innermost split first, so that nested splits of one dimension join back in order.
  for (auto it = placement.splits.rbegin(); it != placement.splits.rend(); ++it) {
    const ShardSplit& s = *it;
    Communicator& group = *context.group(s.group);
    TS_CHECK(group.size() == s.parts, "gather_full", "expected group '", s.group, "' of ",
             s.parts, " ranks, got ", group.size());
    Tensor chunk = movedim(t, s.dim, 0).contiguous();  // (n, ...) with the split dimension first
    Shape stacked = chunk.shape();
    stacked[0] *= s.parts;
    Tensor all = empty(stacked, {.dtype = chunk.dtype(), .device = chunk.device()});
    group.all_gather(chunk.reshape({chunk.numel()}), all.reshape({all.numel()}))->wait();
    t = movedim(all, 0, s.dim).contiguous();
  }
  if (placement.padded()) {
    for (int64_t d = 0; d < t.dim(); ++d) t = t.narrow(d, 0, placement.global_shape[d]);
    return t.contiguous();
  }
  return t.reshape(placement.global_shape);
}

Tensor cut_shard(const Tensor& full, const Placement& placement) {
  if (placement.replicated()) return full;
  autograd::NoGradGuard no_grad;
  TS_CHECK(full.shape() == placement.global_shape, "cut_shard", "expected the serial tensor ",
           shape_str(placement.global_shape), ", got ", full.describe());
  Tensor view = full;
  if (placement.padded()) {
    // Zero rows (columns) up to the view, then cut.
    Tensor padded = zeros(placement.view_shape(), {.dtype = full.dtype(), .device = full.device()});
    Tensor dst = padded;
    for (int64_t d = 0; d < full.dim(); ++d) dst = dst.narrow(d, 0, full.size(d));
    dst.copy_(full);
    view = padded;
  } else {
    view = full.reshape(placement.view_shape());
  }
  const Shape local = placement.local_view();
  const std::vector<int64_t> start = placement.view_offsets();
  for (int64_t d = 0; d < view.dim(); ++d) view = view.narrow(d, start[d], local[d]);
  return view.contiguous().reshape(placement.local_shape());
}

}  // namespace tessera::parallel::tensor

// The shards' update, plain and overlapped (see shard_update.h).
#include "parallel/zero/shard_update.h"

#include <algorithm>

#include "core/error.h"
#include "core/factory.h"
#include "optim/make_optimizer.h"

namespace tessera::parallel::zero {

ShardUpdate::ShardUpdate(std::shared_ptr<const ZeroLayout> layout, std::vector<Tensor> masters,
                         const std::vector<optim::ParamGroup>& groups,
                         const nlohmann::json& optimizer)
    : layout_(std::move(layout)), shards_(std::move(masters)) {
  // The optimizer creates its state beside the masters (on the host under offload).
  std::vector<optim::ParamGroup> shard_groups;
  for (size_t g = 0; g < shards_.size(); ++g) {
    shards_[g].set_requires_grad(true);
    shard_groups.push_back(optim::ParamGroup{
        .params = {shards_[g]}, .lr = groups[g].lr, .weight_decay = groups[g].weight_decay});
  }
  optimizer_ = optim::make_optimizer(optimizer, shard_groups);
}

void ShardUpdate::take_gradients(const std::vector<Tensor>& grads) {
  for (size_t g = 0; g < shards_.size(); ++g) shards_[g].set_grad(grads[g]);
}

void ShardUpdate::step() { optimizer_->step(); }

Tensor ShardUpdate::compute_shard(size_t g, bool chunked) const {
  // 16-bit groups travel rounded: what master_to_model would write, in half the bytes. Chunked
  // stage 3 copies each chunk from here to where it lives, so the rounding stays on the host and
  // the device never holds the whole shard at once.
  const ZeroLayout& l = *layout_;
  const Device device = l.comm->device();
  const Tensor master = shards_[g].detach();
  if (chunked || master.device() == device || !device.is_cuda()) {
    const Tensor rounded = master.to(l.group_dtypes[g]);
    return chunked ? rounded : rounded.to(device);
  }
  // Offloaded on a GPU: rounded into pinned staging (kept across steps) and queued on the copy
  // stream, which the collective that reads the result waits for.
  const int64_t n = master.numel();
  if (staging_.size() <= g) {
    staging_.resize(shards_.size());
    staged_.resize(shards_.size());
  }
  if (!staging_[g].defined()) staging_[g] = l.mover->host_empty(n, l.group_dtypes[g]);
  staged_[g].wait();  // the last step's move out of the staging is done
  staging_[g].copy_(master);
  Tensor out = empty({n}, {.dtype = l.group_dtypes[g], .device = device});
  staged_[g] = l.mover->copy(staging_[g], out);
  return out;
}

OverlappedShardUpdate::OverlappedShardUpdate(std::shared_ptr<const ZeroLayout> layout,
                                             std::vector<Tensor> masters,
                                             const std::vector<optim::ParamGroup>& groups,
                                             const nlohmann::json& optimizer,
                                             GradReduction& reduction)
    : ShardUpdate(std::move(layout), std::move(masters), groups, optimizer),
      reduction_(reduction),
      posted_(shards_.size()) {
  TS_ASSERT(reduction_.reduces_by_range());
  reduction_.on_range_ready([this](size_t g, int64_t offset, const Tensor& grad,
                                   const MoveReady& ready) { step_range(g, offset, grad, ready); });
}

OverlappedShardUpdate::~OverlappedShardUpdate() { reduction_.on_range_ready(nullptr); }

void OverlappedShardUpdate::begin_step() {
  for (size_t g = 0; g < shards_.size(); ++g) {
    optimizer_->begin_sliced_step(g);  // one parameter, the shard, per group
    posted_[g].clear();
  }
  overlapping_ = true;
}

void OverlappedShardUpdate::step_range(size_t g, int64_t offset, const Tensor& grad,
                                       const MoveReady& ready) {
  if (!overlapping_) begin_step();
  posted_[g].emplace_back(offset, grad.numel());
  // `grad` is final once its move to the host is (a view of the host shard gradient the reducer
  // returns at the end): the worker waits for the copy, the trainer's thread goes on.
  worker_.post([this, g, offset, grad, ready] {
    ready.wait();
    optimizer_->step_slice(g, offset, grad);
  });
}

void OverlappedShardUpdate::take_gradients(const std::vector<Tensor>& grads) {
  if (!overlapping_) begin_step();  // no bucket at all
  for (size_t g = 0; g < shards_.size(); ++g) {
    // What no reduced range covered (the padding: zero gradients) steps too, as step() would.
    std::vector<std::pair<int64_t, int64_t>> ranges = posted_[g];
    std::sort(ranges.begin(), ranges.end());
    int64_t at = 0;
    ranges.emplace_back(layout_->plan.groups[g].shard_numel, 0);
    for (const auto& [offset, numel] : ranges) {
      if (offset > at) {
        const Tensor gap = grads[g].narrow(0, at, offset - at);
        worker_.post([this, g, at, gap] { optimizer_->step_slice(g, at, gap); });
      }
      at = std::max(at, offset + numel);
    }
  }
  worker_.drain();
  ShardUpdate::take_gradients(grads);
  overlapping_ = false;
  stepped_ = true;
}

void OverlappedShardUpdate::step() {
  if (std::exchange(stepped_, false)) return;
  ShardUpdate::step();
}

}  // namespace tessera::parallel::zero

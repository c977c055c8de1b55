// Stage 2: bucketed reduce-to-owner of the flat gradients, started from the grad-ready hooks.
#include "parallel/zero/stage2_reducer.h"

#include "core/error.h"
#include "core/factory.h"

namespace tessera::parallel::zero::detail {

namespace {
constexpr size_t kMaxInFlight = 2;  // buckets reducing while backward goes on
}  // namespace

Stage2Reducer::Stage2Reducer(std::shared_ptr<Communicator> c, const ZeroPlan& plan,
                             std::vector<Tensor> params, std::vector<std::string> names,
                             std::vector<DType> group_dtypes, int64_t cap_bytes,
                             Device shard_device, std::shared_ptr<HostMover> mover)
    : comm(std::move(c)),
      params_(std::move(params)),
      names_(std::move(names)),
      group_dtypes_(std::move(group_dtypes)),
      rank_(comm->rank()),
      shard_device_(shard_device),
      mover_(std::move(mover)) {
  std::vector<int64_t> itemsizes;
  for (size_t g = 0; g < plan.groups.size(); ++g) {
    itemsizes.push_back(int64_t(dtype_size(group_dtypes_[g])));
    shard_numel_.push_back(plan.groups[g].shard_numel);
  }
  buckets_ = plan_reduce_buckets(plan, itemsizes, cap_bytes);
  offset_.assign(params_.size(), 0);
  bucket_of_.assign(params_.size(), -1);
  for (size_t p = 0; p < params_.size(); ++p)
    offset_[p] = plan.groups[plan.group_of[p]].slots[plan.slot_of[p]].offset;
  for (size_t b = 0; b < buckets_.size(); ++b)
    for (size_t p : buckets_[b].params) bucket_of_[p] = int64_t(b);
  reset_step();
}

void Stage2Reducer::reset_step() {
  ready_.assign(params_.size(), false);
  pending_.clear();
  for (const ReduceBucket& b : buckets_) pending_.push_back(int64_t(b.params.size()));
  buffers_.assign(buckets_.size(), Tensor());
  works_.assign(buckets_.size(), {});
  done_.assign(buckets_.size(), false);
  next_launch_ = 0;
  step_active = false;
  shard_grads_.clear();
}

// Allocated when first needed and released once reduced, so only buckets in flight hold memory.
const Tensor& Stage2Reducer::buffer(size_t b) {
  if (!buffers_[b].defined()) {
    const ReduceBucket& k = buckets_[b];
    buffers_[b] = empty({k.end - k.begin},
                        {.dtype = group_dtypes_[k.group], .device = params_[k.params[0]].device()});
  }
  return buffers_[b];
}

Tensor Stage2Reducer::slot_view(size_t p) {
  const size_t b = size_t(bucket_of_[p]);
  return buffer(b).narrow(0, offset_[p] - buckets_[b].begin, params_[p].numel());
}

void Stage2Reducer::fill(size_t p, const Tensor& grad) {
  const Tensor view = slot_view(p);
  if (grad.defined()) {
    view.copy_(grad.reshape({params_[p].numel()}));
  } else {
    view.zero_();
  }
  // The gradient now lives in the bucket (and, once reduced, in its owner's shard).
  params_[p].set_grad(Tensor());
  ready_[p] = true;
}

// Buckets start in plan order, so every rank issues the same reduces in the same order.
void Stage2Reducer::launch_ready() {
  while (next_launch_ < buckets_.size() && pending_[next_launch_] == 0) {
    const ReduceBucket& k = buckets_[next_launch_];
    const Tensor& buf = buffer(next_launch_);
    for (const ReducePart& part : k.parts) {
      works_[next_launch_].push_back(comm->reduce(
          buf.narrow(0, part.begin - k.begin, part.end - part.begin), part.owner, ReduceOp::avg));
    }
    ++next_launch_;
  }
  // Bound the memory of buckets in flight: wait for the oldest beyond kMaxInFlight (the ranks
  // start buckets in the same order, so the oldest has started everywhere).
  size_t in_flight = 0;
  for (size_t b = 0; b < next_launch_; ++b) in_flight += done_[b] ? 0 : 1;
  for (size_t b = 0; b < next_launch_ && in_flight > kMaxInFlight; ++b) {
    if (done_[b]) continue;
    complete(b);
    --in_flight;
  }
}

// MPI_Test on every bucket in flight (what moves nonblocking collectives forward); a bucket whose
// reduces are all complete is copied out and released.
void Stage2Reducer::progress() {
  for (size_t b = 0; b < next_launch_; ++b) {
    if (done_[b]) continue;
    bool all = true;
    for (const WorkPtr& w : works_[b]) all = w->is_completed() && all;
    if (all) complete(b);
  }
}

void Stage2Reducer::complete(size_t b) {
  for (const WorkPtr& w : works_[b]) w->wait();
  const ReduceBucket& k = buckets_[b];
  if (shard_grads_.empty()) allocate_shard_grads();
  for (const ReducePart& part : k.parts) {
    if (part.owner != rank_) continue;
    const int64_t n = part.end - part.begin;
    const int64_t offset = part.begin - int64_t(part.owner) * shard_numel_[k.group];
    const Tensor slice = shard_grads_[k.group].narrow(0, offset, n);
    const MoveReady ready = mover_->copy(buffers_[b].narrow(0, part.begin - k.begin, n), slice);
    if (on_shard_ready) on_shard_ready(k.group, offset, slice, ready);
  }
  buffers_[b] = Tensor();
  works_[b].clear();
  done_[b] = true;
}

// Zeros (the padding stays zero). Under offload the mover keeps them from step to step on a GPU:
// every step's reduced ranges overwrite all but the padding, so they need no zeroing again.
void Stage2Reducer::allocate_shard_grads() {
  for (size_t g = 0; g < shard_numel_.size(); ++g) {
    const int64_t n = shard_numel_[g];
    shard_grads_.push_back(shard_device_ == mover_->host()
                               ? mover_->kept_host_zeros(g, n, DType::f32, /*rezero=*/false)
                               : zeros({n}, {.dtype = DType::f32, .device = shard_device_}));
  }
}

void Stage2Reducer::on_grad_ready(size_t p) {
  if (no_sync) return;  // the gradient stays in .grad() and keeps accumulating
  if (bucket_of_[p] < 0) return;
  TS_CHECK(!ready_[p], "zero", "expected one synced backward per finish_gradient_sync(), got a ",
           "second gradient for '", names_[p],
           "' before finish_gradient_sync(); run accumulation micro-steps under no_sync()");
  step_active = true;
  fill(p, params_[p].grad());
  if (--pending_[size_t(bucket_of_[p])] == 0) launch_ready();
  progress();
}

std::vector<Tensor> Stage2Reducer::finish() {
  TS_CHECK(!no_sync, "zero", "expected finish_gradient_sync() after a synced backward, got it ",
           "under no_sync()");
  for (size_t b = next_launch_; b < buckets_.size(); ++b) {
    for (size_t p : buckets_[b].params)
      if (!ready_[p]) fill(p, params_[p].grad());
    pending_[b] = 0;
  }
  launch_ready();
  for (size_t b = 0; b < buckets_.size(); ++b)
    if (!done_[b]) complete(b);
  if (shard_grads_.empty()) allocate_shard_grads();  // no bucket at all: every parameter is empty
  mover_->synchronize();  // the shard gradients' moves to the host are done
  for (const Tensor& p : params_) p.set_grad(Tensor());
  std::vector<Tensor> out = std::move(shard_grads_);
  reset_step();
  return out;
}

}  // namespace tessera::parallel::zero::detail

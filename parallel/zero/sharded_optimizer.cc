// ShardedOptimizer: construction, the gradient paths of stages 1 and 2, clipping across shards,
// and the all-gather of the updated parameters (checkpoint state: zero_state_dict.cc).
#include "parallel/zero/sharded_optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_set>
#include <utility>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/factory.h"
#include "optim/make_optimizer.h"
#include "optim/param_math.h"
#include "parallel/comm/config_check.h"
#include "parallel/zero/host_mover.h"
#include "parallel/zero/offload.h"
#include "parallel/zero/stage2_reducer.h"

namespace tessera::parallel::zero {

namespace {

// Exact and the same on every rank: doubles travel as their bits and are added in rank order.
double sum_over(Communicator& comm, double local) {
  if (comm.size() == 1) return local;
  Tensor mine = empty({1}, {.dtype = DType::i64});
  std::memcpy(mine.data_ptr(), &local, sizeof local);
  Tensor all = empty({comm.size()}, {.dtype = DType::i64});
  comm.all_gather(mine, all)->wait();
  const auto* bits = static_cast<const double*>(all.data_ptr());
  double total = 0;
  for (int r = 0; r < comm.size(); ++r) total += bits[r];
  return total;
}

Tensor flat(const Tensor& t) { return t.reshape({t.numel()}); }

}  // namespace

ZeroPlan plan_parameter_groups(const std::vector<Tensor>& params,
                               const std::vector<optim::ParamGroup>& groups, int ranks,
                               const ZeroPlanOptions& options) {
  // The groups as indices into params, in the plain optimizer's order.
  std::vector<std::vector<size_t>> group_index;
  std::vector<int64_t> numels;
  for (const Tensor& t : params) numels.push_back(t.numel());
  for (size_t g = 0; g < groups.size(); ++g) {
    std::vector<size_t> idx;
    for (const Tensor& p : groups[g].params) {
      size_t k = 0;
      while (k < params.size() && !params[k].is_same(p)) ++k;
      TS_CHECK(k < params.size(), "zero", "expected group parameters among the named ones, got ",
               p.describe(), " in group ", g);
      idx.push_back(k);
    }
    group_index.push_back(std::move(idx));
  }
  return plan_zero(numels, group_index, ranks, options);
}

void check_zero_optimizer(const std::string& type, const std::string& key, int stage) {
  TS_CHECK(type == "sgd" || type == "adam" || type == "adamw", "config", key, " ", type,
           " with zero.stage ", stage, ": ", type,
           " scales each parameter's update by that parameter's norms, which a ZeRO shard does not "
           "hold whole; the ZeRO optimizer runs sgd, adam and adamw. Set ",
           key, " to one of them or zero.stage to 0");
}

ShardedOptimizer::NoSyncGuard::NoSyncGuard(std::optional<DataParallel::NoSyncGuard> dp,
                                           std::shared_ptr<detail::Stage2Reducer> reducer,
                                           bool previous)
    : dp_(std::move(dp)), reducer_(std::move(reducer)), previous_(previous) {}

ShardedOptimizer::NoSyncGuard::NoSyncGuard(NoSyncGuard&& other) noexcept
    : dp_(std::move(other.dp_)), reducer_(std::move(other.reducer_)), previous_(other.previous_) {}

ShardedOptimizer::NoSyncGuard::~NoSyncGuard() {
  if (reducer_) reducer_->no_sync = previous_;
}

ShardedOptimizer::ShardedOptimizer(NamedParams params, const std::vector<optim::ParamGroup>& groups,
                                   const nlohmann::json& optimizer,
                                   std::shared_ptr<Communicator> comm, const ZeroOptions& options)
    : params_(std::move(params)), comm_(std::move(comm)), options_(options) {
  const char* op = "zero";
  TS_CHECK(comm_ != nullptr, op, "expected a data-parallel communicator, got null");
  TS_CHECK(options.stage >= 1 && options.stage <= 3, op,
           "expected stage 1 (sharded optimizer state), 2 (and gradients) or 3 (and parameters), "
           "got ",
           options.stage);
  TS_CHECK(options.bucket_cap_bytes > 0, op, "expected a positive bucket_cap_bytes, got ",
           options.bucket_cap_bytes);
  TS_CHECK(optimizer.is_object() && optimizer.contains("type") && optimizer.at("type").is_string(),
           op, "expected an optimizer object with a string 'type', got ", optimizer.dump());
  check_zero_optimizer(optimizer.at("type").get<std::string>(), "optimizer.type", options.stage);
  TS_CHECK(!options.overlap_step || (options.offload && options.stage >= 2), op,
           "expected the overlapped step with offload at stage 2 or 3 (the host steps each shard "
           "range its reduction completes), got stage ",
           options.stage, options.offload ? " with" : " without", " offload");
  if (options.offload) {
    check_offload_optimizer(optimizer.at("type").get<std::string>(), "optimizer.type");
    // On a GPU the host shards go through the collectives of the checkpoint paths
    // (gather_masters, state_dict) beside host buffers: the group must move host tensors too.
    TS_CHECK(comm_->supports(offload_host_device(comm_->device()).type), op,
             "zero.offload with the ", comm_->backend(), " communicator on ", comm_->device().str(),
             ": the host shards need a group that moves host tensors as well (a "
             "RoutedCommunicator of MPI and NCCL, as the trainer's groups on GPUs are)");
  }
  shard_device_ = options.offload ? offload_host_device(comm_->device()) : comm_->device();
  mover_ = std::make_shared<HostMover>(comm_->device());

  std::unordered_set<const TensorImpl*> seen;
  for (const auto& [name, t] : params_) {
    TS_CHECK(t.defined() && is_floating(t.dtype()), op, "expected floating parameters, got '", name,
             "' ", t.defined() ? t.describe() : "undefined");
    TS_CHECK(t.is_leaf() && t.requires_grad(), op,
             "expected leaf parameters that require grad (ZeRO shards what trains), got '", name,
             "' ", t.describe());
    TS_CHECK(t.is_contiguous(), op, "expected contiguous parameters, got '", name, "'");
    TS_CHECK(t.device().type == comm_->device_type(), op, "expected parameters on the ",
             comm_->backend(), " communicator's device type, got '", name, "' ", t.describe());
    TS_CHECK(seen.insert(t.impl()).second, op, "expected each parameter once, got '", name,
             "' twice");
    tensors_.push_back(t);
  }

  plan_ = plan_parameter_groups(tensors_, groups, comm_->size(), options.plan);
  size_t begin = 0;  // the plain optimizer numbers the parameters through the groups
  for (const optim::ParamGroup& group : groups) {
    group_begin_.push_back(begin);
    begin += group.params.size();
  }

  std::string layout =
      str_cat("zero stage=", options.stage, " cap=", options.bucket_cap_bytes,
              " align=", options.plan.align, " optimizer=", optimizer.dump(), "\n");
  for (size_t i = 0; i < params_.size(); ++i)
    layout += str_cat(params_[i].first, " ", shape_str(tensors_[i].shape()), " ",
                      dtype_name(tensors_[i].dtype()), " group ", plan_.group_of[i], "\n");
  check_same_config(*comm_, layout);

  for (size_t g = 0; g < plan_.groups.size(); ++g) {
    DType dtype = DType::f32;
    const auto& slots = plan_.groups[g].slots;
    if (!slots.empty()) {
      dtype = tensors_[slots[0].param].dtype();
      for (const FlatSlot& s : slots)
        if (tensors_[s.param].dtype() != dtype) dtype = DType::f32;
    }
    comm_dtypes_.push_back(dtype);
    pieces_.push_back(plan_.groups[g].pieces(comm_->rank()));
  }

  // A sharded build (sharded_build.h) drew the parameters identically on every rank and kept only
  // this rank's masters: the parameters are released already and there is nothing to broadcast.
  const bool built_sharded = !options.sharded_masters.empty();
  if (built_sharded) {
    TS_CHECK(options.stage == 3, op,
             "expected master shards from a sharded build only at stage 3 (it releases the "
             "parameters), got stage ",
             options.stage);
    TS_CHECK(options.sharded_masters.size() == plan_.groups.size(), op,
             "expected a master shard per group (", plan_.groups.size(),
             ") from the sharded "
             "build, got ",
             options.sharded_masters.size());
  }
  if (options.stage == 1) {
    dp_ = std::make_unique<DataParallel>(
        params_, comm_,
        DataParallelOptions{.bucket_cap_bytes = options.bucket_cap_bytes,
                            .broadcast_parameters = options.broadcast_parameters});
  } else if (options.broadcast_parameters && comm_->size() > 1 && !built_sharded) {
    autograd::NoGradGuard no_grad;
    for (size_t g = 0; g < plan_.groups.size(); ++g) {
      Tensor buf = pack_group(g, comm_dtypes_[g]);
      comm_->broadcast(buf, 0)->wait();
      for (const FlatSlot& s : plan_.groups[g].slots)
        flat(tensors_[s.param]).copy_(buf.narrow(0, s.offset, s.numel));
    }
  }

  // This rank's f32 masters: its pieces of the (broadcast) parameters, zero padding. The optimizer
  // creates its state beside them (on the host under offload).
  std::vector<optim::ParamGroup> shard_groups;
  for (size_t g = 0; g < plan_.groups.size(); ++g) {
    Tensor shard;
    if (built_sharded) {
      shard = options.sharded_masters[g];
      TS_CHECK(shard.dtype() == DType::f32 && shard.device() == shard_device_ && shard.dim() == 1 &&
                   shard.numel() == plan_.groups[g].shard_numel,
               op, "expected group ", g, "'s master shard from the sharded build as f32 (",
               plan_.groups[g].shard_numel, ") on ", shard_device_.str(), ", got ",
               shard.describe());
    } else {
      shard = zeros({plan_.groups[g].shard_numel}, {.dtype = DType::f32, .device = shard_device_});
      for (const ShardPiece& pc : pieces_[g])
        shard.narrow(0, pc.shard_offset, pc.numel)
            .copy_(flat(tensors_[pc.param]).narrow(0, pc.param_offset, pc.numel));
    }
    shard.set_requires_grad(true);
    shards_.push_back(shard);
    shard_groups.push_back(optim::ParamGroup{
        .params = {shard}, .lr = groups[g].lr, .weight_decay = groups[g].weight_decay});
  }
  optimizer_ = optim::make_optimizer(optimizer, shard_groups);

  std::vector<std::string> names;
  for (const auto& entry : params_) names.push_back(entry.first);
  if (options.stage >= 2) {
    reducer_ =
        std::make_shared<detail::Stage2Reducer>(comm_, plan_, tensors_, names, comm_dtypes_,
                                                options.bucket_cap_bytes, shard_device_, mover_);
    std::weak_ptr<detail::Stage2Reducer> weak = reducer_;
    for (size_t p = 0; p < tensors_.size(); ++p) {
      tensors_[p].add_grad_ready_hook([weak, p](const Tensor&) {
        if (auto r = weak.lock()) r->on_grad_ready(p);
      });
    }
  }
  if (options.overlap_step) {
    worker_ = std::make_unique<StepWorker>();
    posted_.resize(shards_.size());
    reducer_->on_shard_ready = [this](size_t g, int64_t offset, const Tensor& grad,
                                      const MoveReady& ready) {
      step_range(g, offset, grad, ready);
    };
  }
  if (options.stage == 3)
    params3_ = std::make_unique<Stage3Params>(comm_, plan_, tensors_, std::move(names),
                                              compute_shards(), options.stage3);
}

ShardedOptimizer::~ShardedOptimizer() {
  // A NoSyncGuard may keep the reducer alive past this optimizer: it must not call back into it.
  if (reducer_) reducer_->on_shard_ready = nullptr;
}

Tensor ShardedOptimizer::pack_group(size_t g, DType dtype) const {
  const ZeroGroupPlan& gp = plan_.groups[g];
  Tensor buf = zeros({gp.padded_numel()}, {.dtype = dtype, .device = comm_->device()});
  for (const FlatSlot& s : gp.slots)
    buf.narrow(0, s.offset, s.numel).copy_(flat(tensors_[s.param]));
  return buf;
}

ShardedOptimizer::NoSyncGuard ShardedOptimizer::no_sync() {
  if (dp_) return NoSyncGuard(dp_->no_sync(), nullptr, false);
  TS_CHECK(!reducer_->step_active, "zero",
           "expected no_sync() between steps, got it after a synced backward started reducing "
           "gradients; call finish_gradient_sync() first");
  const bool previous = reducer_->no_sync;
  reducer_->no_sync = true;
  return NoSyncGuard(std::nullopt, reducer_, previous);
}

void ShardedOptimizer::finish_gradient_sync() {
  if (reducer_) {
    std::vector<Tensor> grads = reducer_->finish();
    if (options_.overlap_step) {
      finish_overlapped_step(grads);
      if (params3_) params3_->end_window(true);
      return;
    }
    for (size_t g = 0; g < shards_.size(); ++g) {
      shards_[g].set_grad(grads[g]);  // already where the shard is (on the host under offload)
    }
    // The step's forward and backward are over: nothing needs a gathered parameter until the next.
    if (params3_) params3_->end_window(true);
    return;
  }
  if (!dp_->sync_enabled()) return;  // under no_sync, as DataParallel
  dp_->finish_gradient_sync();
  shard_grads_from_model();
}

void ShardedOptimizer::begin_overlapped_step() {
  for (size_t g = 0; g < shards_.size(); ++g) {
    optimizer_->begin_sliced_step(g);  // one parameter, the shard, per group
    posted_[g].clear();
  }
  overlapping_ = true;
}

void ShardedOptimizer::step_range(size_t g, int64_t offset, const Tensor& grad,
                                  const MoveReady& ready) {
  if (!overlapping_) begin_overlapped_step();
  posted_[g].emplace_back(offset, grad.numel());
  // `grad` is final once its move to the host is (a view of the host shard gradient the reducer
  // returns at the end): the worker waits for the copy, the trainer's thread goes on.
  worker_->post([this, g, offset, grad, ready] {
    ready.wait();
    optimizer_->step_slice(g, offset, grad);
  });
}

void ShardedOptimizer::finish_overlapped_step(const std::vector<Tensor>& grads) {
  if (!overlapping_) begin_overlapped_step();  // no bucket at all
  for (size_t g = 0; g < shards_.size(); ++g) {
    // What no reduced range covered (the padding: zero gradients) steps too, as step() would.
    std::vector<std::pair<int64_t, int64_t>> ranges = posted_[g];
    std::sort(ranges.begin(), ranges.end());
    int64_t at = 0;
    ranges.emplace_back(plan_.groups[g].shard_numel, 0);
    for (const auto& [offset, numel] : ranges) {
      if (offset > at) {
        const Tensor gap = grads[g].narrow(0, at, offset - at);
        worker_->post([this, g, at, gap] { optimizer_->step_slice(g, at, gap); });
      }
      at = std::max(at, offset + numel);
    }
  }
  worker_->drain();
  for (size_t g = 0; g < shards_.size(); ++g) shards_[g].set_grad(grads[g]);
  overlapping_ = false;
  stepped_ = true;
}

void ShardedOptimizer::step() {
  if (std::exchange(stepped_, false)) return;
  optimizer_->step();
}

// Stage 1: every rank holds every averaged gradient; it keeps its shard's slice in f32 and drops
// the rest, so only the shard's gradient outlives the reduction.
void ShardedOptimizer::shard_grads_from_model() {
  for (size_t g = 0; g < shards_.size(); ++g) {
    const int64_t n = plan_.groups[g].shard_numel;
    // Zeroed each step: a piece whose gradient is undefined reads zero.
    const Tensor grad = shard_device_ == mover_->host()
                            ? mover_->kept_host_zeros(g, n, DType::f32, /*rezero=*/true)
                            : zeros({n}, {.dtype = DType::f32, .device = shard_device_});
    for (const ShardPiece& pc : pieces_[g]) {
      const Tensor src = tensors_[pc.param].grad();
      if (src.defined())
        mover_->copy(flat(src).narrow(0, pc.param_offset, pc.numel),
                     grad.narrow(0, pc.shard_offset, pc.numel));
    }
    shards_[g].set_grad(grad);
  }
  mover_->synchronize();  // the gradients' moves to the host are done
  for (const Tensor& t : tensors_) t.set_grad(Tensor());
}

optim::FoundInfReducer ShardedOptimizer::found_inf_reducer() const {
  std::shared_ptr<Communicator> comm = comm_;
  return [comm](bool local) {
    if (comm->size() == 1) return local;
    Tensor flag = from_vector<int32_t>({local ? 1 : 0}, {1});
    comm->all_reduce(flag, ReduceOp::max)->wait();
    return flag.data<int32_t>()[0] != 0;
  };
}

double ShardedOptimizer::local_grad_sq_sum(const std::vector<bool>& counted) const {
  TS_CHECK(counted.empty() || counted.size() == tensors_.size(), "zero",
           "expected a counted flag per parameter (", tensors_.size(), "), got ", counted.size());
  double total = 0;
  for (size_t g = 0; g < shards_.size(); ++g) {
    const Tensor grad = shards_[g].grad();
    if (!grad.defined()) continue;
    if (counted.empty()) {
      total += optim::detail::sum_squares(grad);  // padding is zero
      continue;
    }
    for (const ShardPiece& pc : pieces_[g])
      if (counted[pc.param])
        total += optim::detail::sum_squares(grad.narrow(0, pc.shard_offset, pc.numel));
  }
  return total;
}

double ShardedOptimizer::clip_grad_norm(double max_norm, const optim::SumReducer& reduce_more,
                                        const std::vector<bool>& counted) {
  TS_CHECK(max_norm > 0.0, "clip_grad_norm", "expected max_norm > 0, got ", max_norm);
  TS_CHECK(!stepped_, "clip_grad_norm",
           "expected gradients not yet stepped, got them after an overlapped step "
           "(ZeroOptions::overlap_step stepped each shard range as its reduction completed); "
           "clipping needs the step after backward: turn overlap_step off");
  double sq = sum_over(*comm_, local_grad_sq_sum(counted));
  if (reduce_more) sq = reduce_more(sq);
  const double norm = std::sqrt(sq);
  if (!std::isfinite(norm)) return norm;
  const double coef = max_norm / (norm + 1e-6);  // optim::clip_grad_norm's rule
  if (coef < 1.0)
    for (const Tensor& s : shards_)
      if (s.grad().defined()) optim::detail::scale_inplace(s.grad(), coef);
  return norm;
}

Tensor ShardedOptimizer::compute_shard(size_t g) const {
  // 16-bit groups travel rounded: what master_to_model would write, in half the bytes. Chunked
  // stage 3 copies each chunk from here to where it lives, so the rounding stays on the host and
  // the device never holds the whole shard at once.
  const Tensor master = shards_[g].detach();
  const bool chunked = params3_ && params3_->chunked();
  if (chunked || master.device() == comm_->device() || !comm_->device().is_cuda()) {
    const Tensor rounded = master.to(comm_dtypes_[g]);
    return chunked ? rounded : rounded.to(comm_->device());
  }
  // Offloaded on a GPU: rounded into pinned staging (kept across steps) and queued on the copy
  // stream, which the collective that reads the result waits for.
  const int64_t n = master.numel();
  if (staging_.size() <= g) {
    staging_.resize(shards_.size());
    staged_.resize(shards_.size());
  }
  if (!staging_[g].defined()) staging_[g] = mover_->host_empty(n, comm_dtypes_[g]);
  staged_[g].wait();  // the last step's move out of the staging is done
  staging_[g].copy_(master);
  Tensor out = empty({n}, {.dtype = comm_dtypes_[g], .device = comm_->device()});
  staged_[g] = mover_->copy(staging_[g], out);
  return out;
}

std::vector<Tensor> ShardedOptimizer::compute_shards() const {
  std::vector<Tensor> out;
  for (size_t g = 0; g < shards_.size(); ++g) out.push_back(compute_shard(g));
  return out;
}

void ShardedOptimizer::gather_parameters() {
  autograd::NoGradGuard no_grad;
  if (params3_) return params3_->update(compute_shards());
  for (size_t g = 0; g < shards_.size(); ++g) {
    const ZeroGroupPlan& gp = plan_.groups[g];
    if (gp.slots.empty()) continue;
    const DType dtype = comm_dtypes_[g];
    const Tensor mine = compute_shard(g);
    Tensor all = empty({gp.padded_numel()}, {.dtype = dtype, .device = comm_->device()});
    comm_->all_gather(mine, all)->wait();
    for (const FlatSlot& s : gp.slots)
      flat(tensors_[s.param]).copy_(all.narrow(0, s.offset, s.numel));
  }
}

void ShardedOptimizer::zero_grad() {
  for (const Tensor& s : shards_) s.set_grad(Tensor());
  for (const Tensor& t : tensors_) t.set_grad(Tensor());
}

size_t ShardedOptimizer::state_index(size_t param) const {
  TS_CHECK(param < tensors_.size(), "zero", "expected a parameter index below ", tensors_.size(),
           ", got ", param);
  return group_begin_[plan_.group_of[param]] + plan_.slot_of[param];
}

size_t ShardedOptimizer::param_of_state_index(size_t k) const {
  for (size_t g = 0; g < plan_.groups.size(); ++g) {
    const auto& slots = plan_.groups[g].slots;
    if (k >= group_begin_[g] && k < group_begin_[g] + slots.size())
      return slots[k - group_begin_[g]].param;
  }
  TS_FAIL("zero", "expected a state index below ", tensors_.size(), ", got ", k);
}

}  // namespace tessera::parallel::zero

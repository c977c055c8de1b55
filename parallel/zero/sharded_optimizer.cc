// ShardedOptimizer: the options' checks, the composition of the parts make_zero_parts chooses, and
// clipping across shards (checkpoint state: zero_state_dict.cc).
#include "parallel/zero/sharded_optimizer.h"

#include <cmath>
#include <cstring>
#include <optional>
#include <utility>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/factory.h"
#include "optim/param_math.h"
#include "parallel/comm/rank_sum.h"
#include "parallel/zero/offload.h"
#include "parallel/zero/overlap_rules.h"

namespace tessera::parallel::zero {

void check_zero_optimizer(const std::string& type, const std::string& key, int stage) {
  TS_CHECK(type == "sgd" || type == "adam" || type == "adamw", "config", key, " ", type,
           " with zero.stage ", stage, ": ", type,
           " scales each parameter's update by that parameter's norms, which a ZeRO shard does not "
           "hold whole; the ZeRO optimizer runs sgd, adam and adamw. Set ",
           key, " to one of them or zero.stage to 0");
}

ShardedOptimizer::ShardedOptimizer(NamedParams params, const std::vector<optim::ParamGroup>& groups,
                                   const nlohmann::json& optimizer,
                                   std::shared_ptr<Communicator> comm, const ZeroOptions& options)
    : params_(std::move(params)), options_(options) {
  const char* op = "zero";
  TS_CHECK(comm != nullptr, op, "expected a data-parallel communicator, got null");
  TS_CHECK(options.stage >= 1 && options.stage <= 3, op,
           "expected stage 1 (sharded optimizer state), 2 (and gradients) or 3 (and parameters), "
           "got ",
           options.stage);
  TS_CHECK(options.bucket_cap_bytes > 0, op, "expected a positive bucket_cap_bytes, got ",
           options.bucket_cap_bytes);
  TS_CHECK(optimizer.is_object() && optimizer.contains("type") && optimizer.at("type").is_string(),
           op, "expected an optimizer object with a string 'type', got ", optimizer.dump());
  check_zero_optimizer(optimizer.at("type").get<std::string>(), "optimizer.type", options.stage);
  check_overlap_step(options.overlap_step, options.offload, options.stage, OverlapAsker::optimizer);
  if (options.offload) {
    check_offload_optimizer(optimizer.at("type").get<std::string>(), "optimizer.type");
    // On a GPU the host shards go through the collectives of the checkpoint paths
    // (gather_masters, state_dict) beside host buffers: the group must move host tensors too.
    TS_CHECK(comm->supports(offload_host_device(comm->device()).type), op, "zero.offload with the ",
             comm->backend(), " communicator on ", comm->device().str(),
             ": the host shards need a group that moves host tensors as well (a "
             "RoutedCommunicator of MPI and NCCL, as the trainer's groups on GPUs are)");
  }
  layout_ = make_zero_layout(params_, groups, optimizer, comm,
                             {.stage = options.stage,
                              .bucket_cap_bytes = options.bucket_cap_bytes,
                              .plan = options.plan,
                              .offload = options.offload});
  parts_ = make_zero_parts(layout_, groups, optimizer,
                           {.stage = options.stage,
                            .bucket_cap_bytes = options.bucket_cap_bytes,
                            .broadcast_parameters = options.broadcast_parameters,
                            .overlap_step = options.overlap_step,
                            .stage3 = options.stage3,
                            .sharded_masters = options.sharded_masters});
}

ShardedOptimizer::~ShardedOptimizer() = default;

ShardedOptimizer::NoSyncGuard ShardedOptimizer::no_sync() {
  return NoSyncGuard(parts_.reduction->pause());
}

void ShardedOptimizer::finish_gradient_sync() {
  std::optional<std::vector<Tensor>> grads = parts_.reduction->finish();
  if (!grads) return;  // under no_sync (stage 1), as DataParallel
  parts_.update->take_gradients(*grads);
  parts_.sync->backward_done();
}

void ShardedOptimizer::step() { parts_.update->step(); }

optim::FoundInfReducer ShardedOptimizer::found_inf_reducer() const {
  std::shared_ptr<Communicator> comm = layout_->comm;
  return [comm](bool local) {
    if (comm->size() == 1) return local;
    Tensor flag = from_vector<int32_t>({local ? 1 : 0}, {1});
    comm->all_reduce(flag, ReduceOp::max)->wait();
    return flag.data<int32_t>()[0] != 0;
  };
}

double ShardedOptimizer::local_grad_sq_sum(const std::vector<bool>& counted) const {
  const std::vector<Tensor>& params = layout_->params;
  TS_CHECK(counted.empty() || counted.size() == params.size(), "zero",
           "expected a counted flag per parameter (", params.size(), "), got ", counted.size());
  const std::vector<Tensor>& shards = shard_params();
  double total = 0;
  for (size_t g = 0; g < shards.size(); ++g) {
    const Tensor grad = shards[g].grad();
    if (!grad.defined()) continue;
    if (counted.empty()) {
      total += optim::detail::sum_squares(grad);  // padding is zero
      continue;
    }
    for (const ShardPiece& pc : layout_->pieces[g])
      if (counted[pc.param])
        total += optim::detail::sum_squares(grad.narrow(0, pc.shard_offset, pc.numel));
  }
  return total;
}

double ShardedOptimizer::clip_grad_norm(double max_norm, const optim::SumReducer& reduce_more,
                                        const std::vector<bool>& counted) {
  TS_CHECK(max_norm > 0.0, "clip_grad_norm", "expected max_norm > 0, got ", max_norm);
  TS_CHECK(!parts_.update->stepped(), "clip_grad_norm",
           "expected gradients not yet stepped, got them after an overlapped step "
           "(ZeroOptions::overlap_step stepped each shard range as its reduction completed); "
           "clipping needs the step after backward: turn overlap_step off");
  // Exact and the same on every rank (parallel/comm/rank_sum.h).
  double sq = sum_over_ranks(layout_->comm.get(), {local_grad_sq_sum(counted)})[0];
  if (reduce_more) sq = reduce_more(sq);
  const double norm = std::sqrt(sq);
  if (!std::isfinite(norm)) return norm;
  const double coef = max_norm / (norm + 1e-6);  // optim::clip_grad_norm's rule
  if (coef < 1.0)
    for (const Tensor& s : shard_params())
      if (s.grad().defined()) optim::detail::scale_inplace(s.grad(), coef);
  return norm;
}

ParamSync::ComputeShard ShardedOptimizer::compute_shard() const {
  const ShardUpdate* update = parts_.update.get();
  return [update](size_t g, bool chunked) { return update->compute_shard(g, chunked); };
}

void ShardedOptimizer::gather_parameters() { parts_.sync->publish(compute_shard()); }

void ShardedOptimizer::zero_grad() {
  for (const Tensor& s : shard_params()) s.set_grad(Tensor());
  for (const Tensor& t : layout_->params) t.set_grad(Tensor());
}

size_t ShardedOptimizer::state_index(size_t param) const {
  const size_t n = layout_->params.size();
  TS_CHECK(param < n, "zero", "expected a parameter index below ", n, ", got ", param);
  return layout_->group_begin[layout_->plan.group_of[param]] + layout_->plan.slot_of[param];
}

size_t ShardedOptimizer::param_of_state_index(size_t k) const {
  for (size_t g = 0; g < layout_->plan.groups.size(); ++g) {
    const auto& slots = layout_->plan.groups[g].slots;
    const size_t begin = layout_->group_begin[g];
    if (k >= begin && k < begin + slots.size()) return slots[k - begin].param;
  }
  TS_FAIL("zero", "expected a state index below ", layout_->params.size(), ", got ", k);
}

}  // namespace tessera::parallel::zero

// ShardedOptimizer: ZeRO stages 1, 2 and 3 over a data-parallel communicator. The f32 master
// weights and the optimizer state exist only for this rank's shard of each parameter group's flat
// buffer (zero_plan.h); a plain optimizer (optim/make_optimizer.h) steps those shards, and the
// updated shards are all-gathered back into the model's parameters (in their own dtype: 16-bit
// models get the round-to-nearest-even copies optim::MasterWeights would give).
//
//   stage 1  gradients are all-reduced during backward (parallel::DataParallel, its buckets and
//            hooks); each rank then copies its shard's slice of them into its shard's gradient.
//   stage 2  gradients are reduce-scattered: each rank receives only its shard's average. Buckets
//            of the flat gradient are reduced to the ranks that own them from the grad-ready hooks
//            during backward, as data parallelism all-reduces (see "Stage 2" below).
//   stage 3  stage 2, and the parameters are sharded too: each rank keeps its shard in the
//            parameters' dtype and every parameter is released, gathered when read and released
//            again (stage3_params.h). finish_gradient_sync() releases what the step gathered, and
//            gather_parameters() only rounds the updated masters into the compute shards.
//
// One optimizer step with k accumulation micro-steps:
//   for (i < k - 1) { auto guard = zero.no_sync(); backward(loss_i); }
//   backward(loss_last);
//   zero.finish_gradient_sync();  // shard_params()[g].grad(): this rank's averaged shard gradient
//   [scaler.unscale(zero.shard_params()) with
//   scaler.set_found_inf_reducer(zero.found_inf_reducer())] [zero.clip_grad_norm(max_norm)]
//   zero.step();                  // or scaler.step(zero.optimizer())
//   zero.gather_parameters();     // the model's parameters = the updated masters
//   zero.zero_grad();
//
// The stages differ only in their parts, which make_zero_parts (zero_parts.h) chooses once from
// the options: the gradient reduction (grad_reduction.h: all-reduce for stage 1, reduce-to-owner
// for 2 and 3), the shards' update (shard_update.h: the plain optimizer over the master shards,
// or the overlapped step), and the parameter sync (param_sync.h: all-gather for 1 and 2, stage 3's
// gather on use). This class composes them behind the API below; the shared layout (plan, pieces,
// dtypes, where the shards live) is zero_layout.h.
//
// Element-wise optimizers (sgd, adam, adamw) step a shard exactly as they step the whole
// parameters, so the result equals the unsharded optimizer's (the gradients differ only by the
// order in which MPI sums them). LAMB and LARS need per-parameter norms and are refused. Every
// parameter of a group shares the group shard's step count: every parameter must require grad,
// and one without a gradient in a step counts as a zero gradient (as under DataParallel).
//
// Stage 2: a parameter's gradient, when it arrives in the synced backward, is copied into the
// bucket that holds its flat range and released; a full bucket's elements are reduced (averaged)
// to the rank owning them, one reduce per owner (a bucket split at shard boundaries), started in
// plan order on every rank. As in DataParallel, every grad-ready hook tests the buckets in flight
// so MPI progresses them during backward (at most two buckets stay in flight: a third waits for
// the oldest), and finish_gradient_sync() fills what never arrived and waits. Gradient memory in
// the synced backward is then the gradients of the layer backward is in, the buckets in flight and
// this rank's f32 shard, instead of every gradient plus DataParallel's bucket copy of them. Under
// accumulation the micro-steps before the last still sum into the full .grad() locally (as
// DataParallel's no_sync), and reduce once.
//
// Offload (ZeroOptions::offload, ZeRO-Offload): the f32 master shards, their gradients and the
// optimizer state live in host memory (offload.h) and adam / adamw steps them there with the CPU
// Adam; the model's parameters (stage 3: its compute shards) stay on the device. Each reduced range
// of a shard's gradient moves to the host as its bucket completes (stage 1: after the all-reduce),
// so the device never holds the whole shard gradient; gather_parameters() rounds the updated
// masters to the parameters' dtype on the host and copies them to the device, where stages 1 and 2
// all-gather them and stage 3 keeps them as its compute shards. The device then holds no master
// and no optimizer state (stage 3 f32: its compute shard is a device copy of the master); the
// numbers are the same ones as without offload.
//
// Overlapped step (ZeroOptions::overlap_step, stages 2 and 3 with offload): the host steps each
// range of this rank's shard as soon as its reduction completes, on a worker thread
// (step_worker.h), while backward goes on with the layers not yet reduced, instead of stepping
// every shard after backward. Element-wise optimizers give each element the same numbers either
// way (optim::Optimizer::step_slice). finish_gradient_sync() then steps what no bucket covered
// (the padding) and waits for the worker: the step is over and step() only ends it. Nothing may
// change the gradients between backward and the step, so global-norm clipping and loss scaling
// are refused with it (clip_grad_norm() throws after an overlapped step).
//
// Checkpoints: state_dict() returns the plain optimizer's format under the plain optimizer's
// indices (parameter k counting through the groups, "state.<k>.<name>" with the parameter's
// shape), gathered from the shards, so ZeRO and plain runs resume each other's state.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "optim/clip_grad.h"
#include "optim/loss_scaler.h"
#include "optim/optimizer.h"
#include "parallel/comm/communicator.h"
#include "parallel/zero/stage3_params.h"
#include "parallel/zero/zero_layout.h"
#include "parallel/zero/zero_parts.h"
#include "parallel/zero/zero_plan.h"

namespace tessera::parallel::zero {

struct ZeroOptions {
  int stage = 1;  // 1, 2 or 3
  // Bytes per gradient bucket: DataParallel's buckets (stage 1), the reduce buckets (stage 2).
  int64_t bucket_cap_bytes = 25 * 1024 * 1024;
  // Copy rank 0's parameters to every rank at construction.
  bool broadcast_parameters = true;
  ZeroPlanOptions plan = {};
  Stage3Options stage3 = {};  // stage 3 only
  bool offload = false;       // masters, their gradients and optimizer state on the host (above)
  bool overlap_step = false;  // offload, stages 2 and 3: the host steps during backward (above)
  // Stage 3 after a sharded build (sharded_build.h): this rank's f32 master shards, one per group
  // on the shard device, drawn while the model was built; the parameters are released already.
  // Empty: the masters are taken from the parameters (broadcast from rank 0 first).
  std::vector<Tensor> sharded_masters;
};

class ShardedOptimizer {
 public:
  using NamedParams = std::vector<std::pair<std::string, Tensor>>;

  // Collective over `comm` (the data-parallel group). params: the model's parameters (leaves of
  // any floating dtype, requiring grad); groups: the optimizer's parameter groups over them (each
  // parameter in exactly one), with their lr / weight_decay overrides; optimizer: make_optimizer's
  // JSON, of type sgd, adam or adamw. Checks that every rank passes the same layout, broadcasts
  // rank 0's parameters and keeps this rank's f32 master shards.
  ShardedOptimizer(NamedParams params, const std::vector<optim::ParamGroup>& groups,
                   const nlohmann::json& optimizer, std::shared_ptr<Communicator> comm,
                   const ZeroOptions& options = {});
  ~ShardedOptimizer();
  ShardedOptimizer(const ShardedOptimizer&) = delete;
  ShardedOptimizer& operator=(const ShardedOptimizer&) = delete;

  // While alive, backward only accumulates gradients locally in .grad(); the next synced backward
  // reduces the sums.
  class NoSyncGuard {
   public:
    NoSyncGuard(NoSyncGuard&&) noexcept = default;
    NoSyncGuard& operator=(NoSyncGuard&&) = delete;
    ~NoSyncGuard() = default;

   private:
    friend class ShardedOptimizer;
    explicit NoSyncGuard(std::unique_ptr<GradReduction::Pause> pause) : pause_(std::move(pause)) {}
    std::unique_ptr<GradReduction::Pause> pause_;
  };
  [[nodiscard]] NoSyncGuard no_sync();

  // Collective: after the synced backward, each shard's .grad() holds its average over ranks
  // (f32, padding zero) and the model's parameters hold no gradient.
  void finish_gradient_sync();

  // The optimizer step over the shards: optimizer().step(), or, after an overlapped step
  // (finish_gradient_sync() already stepped them), nothing.
  void step();

  // This rank's f32 master shard of each group ((shard_numel), the group's order); their grads
  // are set by finish_gradient_sync().
  const std::vector<Tensor>& shard_params() const { return parts_.update->shards(); }
  // The plain optimizer over shard_params() (one parameter per group).
  optim::Optimizer& optimizer() { return parts_.update->optimizer(); }
  const optim::Optimizer& optimizer() const { return parts_.update->optimizer(); }

  // Agrees a found-inf flag over the data group (logical or), for DynamicLossScaler.
  optim::FoundInfReducer found_inf_reducer() const;
  // This rank's part of the squared global gradient norm: the sum over its shards of the squared
  // gradient elements of the parameters with counted[i] (all when counted is empty).
  double local_grad_sq_sum(const std::vector<bool>& counted = {}) const;
  // Global-norm clipping across shards (optim::clip_grad_norm's rule): the norm is the square root
  // of the data group's sum of local_grad_sq_sum(counted), passed through `reduce_more` when given
  // (the sum over other groups, e.g. the tensor group); a finite norm above max_norm scales every
  // shard gradient by max_norm / (norm + 1e-6). Returns the norm. Collective.
  double clip_grad_norm(double max_norm, const optim::SumReducer& reduce_more = {},
                        const std::vector<bool>& counted = {});

  // Collective: every model parameter = its updated f32 master, gathered from the shards (stage
  // 3: the compute shards = the masters; the parameters stay released until read).
  void gather_parameters();
  // Clears the shards' and the model parameters' gradients.
  void zero_grad();

  // Collective: the plain optimizer's state over the unsharded parameters (see the top).
  optim::OptimizerState state_dict() const;
  // Loads a plain optimizer's state (any layout's checkpoint, full parameter shapes); each rank
  // keeps its shard. The parameters of a group must share one step count. Errors name the entry.
  void load_state_dict(const optim::OptimizerState& state);
  // Collective: out[i] (f32, parameter i's shape, or undefined to skip) = parameter i's master.
  void gather_masters(const std::vector<Tensor>& out) const;
  // Each rank takes its shard of `values` (parameter i's f32 master value, its shape). Collective
  // under stage 3 (the compute shards follow; reading a released parameter gathers it).
  void load_masters(const std::vector<Tensor>& values);

  // A sharded checkpoint's part of this rank, without communication: each piece of a parameter in
  // this rank's shards, as a flat range of the parameter, with views of its master and of its
  // optimizer state ("exp_avg", ...; none before the first step).
  struct ShardSlice {
    size_t param = 0;      // index into params()
    int64_t offset = 0;    // the parameter's flat elements [offset, offset + master.numel())
    Tensor master;         // f32, a view into shard_params()
    std::vector<std::pair<std::string, Tensor>> state;
  };
  std::vector<ShardSlice> shard_slices() const;
  // state_dict()'s meta (type, param_groups, each parameter's step) without the tensors, so
  // without communication.
  nlohmann::json state_meta() const;
  // Loads this rank's master and optimizer-state shards from a sharded checkpoint, reading only
  // its own flat ranges: read(param, offset, numel, what) returns parameter `param`'s flat
  // elements [offset, offset + numel) of its master (what "") or of state `what`. meta: the plain
  // optimizer's (state_dict()'s numbering); state_names: the state tensors of a stepped group.
  // Collective: the model's parameters then hold the loaded masters (gather_parameters).
  using SliceReader =
      std::function<Tensor(size_t param, int64_t offset, int64_t numel, const std::string& what)>;
  void load_shards(const nlohmann::json& meta, const std::vector<std::string>& state_names,
                   const SliceReader& read);

  int stage() const { return options_.stage; }
  bool offloaded() const { return options_.offload; }
  bool overlaps_step() const { return options_.overlap_step; }
  // Where shard_params(), their gradients and the optimizer state live: the communicator's device,
  // or offload_host_device() of it under offload.
  Device shard_device() const { return layout_->shard_device; }
  // Opens a window in which stage 3 may gather released parameters (Stage3Params::GatherWindow);
  // below stage 3 parameters are never released and the window does nothing.
  [[nodiscard]] Stage3Params::GatherWindow gather_window() {
    return Stage3Params::GatherWindow(stage3());
  }
  // Stage 3's parameter manager (null below stage 3).
  const Stage3Params* stage3() const { return parts_.sync->stage3(); }
  Stage3Params* stage3() { return parts_.sync->stage3(); }
  const ZeroPlan& plan() const { return layout_->plan; }
  const NamedParams& params() const { return params_; }
  const std::shared_ptr<Communicator>& comm() const { return layout_->comm; }
  // The plain optimizer's parameter index of parameter i (its place counting through the groups).
  size_t state_index(size_t param) const;
  // The parameter behind plain state index k.
  size_t param_of_state_index(size_t k) const;

 private:
  // A plain optimizer's meta checked against the plan: the inner optimizer's meta (one parameter
  // per group) and each group's step (0: not stepped).
  nlohmann::json inner_meta(const nlohmann::json& meta, std::vector<int64_t>& steps) const;
  // Stage 3's compute shards from the masters (ParamSync's ComputeShard over the update).
  ParamSync::ComputeShard compute_shard() const;

  NamedParams params_;
  ZeroOptions options_;
  std::shared_ptr<const ZeroLayout> layout_;
  ZeroParts parts_;
};

// The ZeRO-equivalent of make_optimizer's type check: throws ValueError naming `key` (the config
// key of the optimizer type, e.g. "optimizer.type") unless type is sgd, adam or adamw.
void check_zero_optimizer(const std::string& type, const std::string& key, int stage);

}  // namespace tessera::parallel::zero

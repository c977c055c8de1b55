// Multi-rank program run by zero_test.sh under mpirun on 2 and 4 ranks: ZeRO stages 1, 2 and 3
// train a small MLP for several steps and must equal stage 0 (DataParallel + the plain optimizer
// over f32 masters, the trainer's path) — f32 AdamW and SGD with clipping and accumulation, f16
// with dynamic loss scaling (an init scale that overflows: skipped steps agreed across shards),
// bf16 — and hold 1/N of stage 0's optimizer state and reduced gradients per rank (stage 2 also
// peaks below stage 1 on a deep model, its reduces starting during backward); their checkpoint
// state is the plain optimizer's, and resumes either way with the same next steps. With offload
// (f32, bf16 and f16 AdamW on stages 1-3) the losses and masters are bit-identical to the same
// stage without it, and the allocator's counters show the masters, their gradients and the
// optimizer state moved from the device to the host domain, byte for byte. Any failure aborts the
// job naming the rank.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "core/allocator.h"
#include "core/factory.h"
#include "core/generator.h"
#include "models/nn/linear.h"
#include "models/nn/module.h"
#include "optim/clip_grad.h"
#include "optim/loss_scaler.h"
#include "optim/make_optimizer.h"
#include "optim/mixed_precision.h"
#include "parallel/comm/mpi_runtime.h"
#include "parallel/data/data_parallel.h"
#include "parallel/zero/offload.h"
#include "parallel/zero/sharded_optimizer.h"
#include "tests/parallel/rank_check.h"

namespace tessera::parallel::zero {
namespace {

constexpr int64_t kIn = 32, kHidden = 64, kOut = 16, kMicro = 3;
// Where ZeRO-Offload keeps the masters and optimizer state on this CPU-only machine.
const Device kHost = offload_host_device(kCPU);

// kIn -> kHidden, `hidden` layers kHidden -> kHidden, -> kOut, GELU between.
class Mlp : public nn::Module {
 public:
  explicit Mlp(int64_t hidden = 1) {
    Generator gen(7);
    auto spec = [](int64_t in, int64_t out) {
      return nn::LinearSpec{
          .in_features = in, .out_features = out, .init = nn::LinearInit::uniform};
    };
    layers_.push_back(
        register_module("fc1", std::make_shared<nn::Linear>(spec(kIn, kHidden), gen)));
    for (int64_t i = 0; i < hidden; ++i)
      layers_.push_back(register_module(str_cat("fc", i + 2),
                                        std::make_shared<nn::Linear>(spec(kHidden, kHidden), gen)));
    layers_.push_back(register_module(str_cat("fc", hidden + 2),
                                      std::make_shared<nn::Linear>(spec(kHidden, kOut), gen)));
  }
  std::string type_name() const override { return "Mlp"; }
  Tensor forward(Tensor x) {
    for (size_t i = 0; i < layers_.size(); ++i)
      x = i == 0 ? layers_[i]->forward(x) : layers_[i]->forward(gelu(x));
    return x;
  }

 private:
  std::vector<std::shared_ptr<nn::Linear>> layers_;
};

struct Case {
  std::string name;
  nlohmann::json optimizer;
  DType dtype = DType::f32;
  int64_t accum = 2;
  double clip = 0.2;  // below the first steps' norms: clipping acts
  bool scaler = false;
  double init_scale = 65536.0;
  double tol = 1e-6;        // on the f32 masters, relative to their largest magnitude
  int64_t hidden = 1;       // the Mlp's hidden layers
  bool check_peak = false;  // stage 2's step peak must be below stage 1's
};

// Stage 0 (the trainer's plain path) or ZeRO stage 1 / 2, one step at a time.
class Run {
 public:
  Run(int stage, const Case& c, const std::shared_ptr<Communicator>& comm, bool offload = false,
      bool overlap = false)
      : stage_(stage), case_(c), comm_(comm), model_(c.hidden) {
    if (c.dtype != DType::f32) model_.to(c.dtype);
    std::vector<optim::ParamGroup> groups =
        optim::param_groups_with_decay(model_.named_parameters(), 0.1);
    if (stage == 0) {
      masters_ = std::make_unique<optim::MasterWeights>(model_.parameters());
      optimizer_ = optim::make_optimizer(c.optimizer, masters_->master_groups(groups));
      dp_ = std::make_unique<DataParallel>(model_.named_parameters(), comm,
                                           DataParallelOptions{.bucket_cap_bytes = 4096});
    } else {
      // Small buckets: stage 2 reduces several during backward.
      const int64_t device_before = memory_stats(kCPU).current_bytes;
      const int64_t host_before = memory_stats(kHost).current_bytes;
      zero_ = std::make_unique<ShardedOptimizer>(
          model_.named_parameters(), groups, c.optimizer, comm,
          ZeroOptions{.stage = stage,
                      .bucket_cap_bytes = 4096,
                      .offload = offload,
                      .overlap_step = overlap});
      built_device_bytes = memory_stats(kCPU).current_bytes - device_before;
      built_host_bytes = memory_stats(kHost).current_bytes - host_before;
    }
    if (c.scaler) {
      scaler_ = std::make_unique<optim::DynamicLossScaler>(
          optim::LossScalerOptions{.init_scale = c.init_scale, .growth_interval = 2});
      if (zero_) scaler_->set_found_inf_reducer(zero_->found_inf_reducer());
    }
  }

  optim::Optimizer& optimizer() { return zero_ ? zero_->optimizer() : *optimizer_; }

  void step(int64_t s) {
    optimizer().set_lr(1e-2 * (1.0 + 0.1 * double(s)));
    const int n = comm_->size(), r = comm_->rank();
    Generator gen(1000 + uint64_t(s));
    Tensor x = randn({kMicro * n * case_.accum, kIn}, {}, &gen);
    Tensor y = randn({kMicro * n * case_.accum, kOut}, {}, &gen);
    const int64_t start_bytes = memory_stats(kCPU).current_bytes;  // no gradient exists here
    const int64_t start_host_bytes = memory_stats(kHost).current_bytes;
    double step_loss = 0;
    const Stage3Params::GatherWindow window(zero_ ? zero_->stage3() : nullptr);
    reset_peak_memory(kCPU);
    for (int64_t m = 0; m < case_.accum; ++m) {
      std::optional<DataParallel::NoSyncGuard> dp_guard;
      std::optional<ShardedOptimizer::NoSyncGuard> zero_guard;
      if (m + 1 < case_.accum) {
        if (dp_) dp_guard.emplace(dp_->no_sync());
        if (zero_) zero_guard.emplace(zero_->no_sync());
      }
      const int64_t row = (m * n + r) * kMicro;
      Tensor xm = x.narrow(0, row, kMicro).contiguous(), ym = y.narrow(0, row, kMicro).contiguous();
      if (case_.dtype != DType::f32) {
        xm = to_dtype(xm, case_.dtype);
        ym = to_dtype(ym, case_.dtype);
      }
      Tensor loss = mul(mean(square(sub(model_.forward(xm), ym))), 1.0 / double(case_.accum));
      step_loss += loss.item();
      if (scaler_) loss = scaler_->scale_loss(loss);
      if (zero_ && stage_ >= 2) comm_->reset_stats();
      autograd::backward({loss});
      if (zero_ && stage_ >= 2 && m + 1 == case_.accum)
        reduces_in_backward_ += comm_->stats()[CommKind::reduce].calls;
    }
    // The overlapped step begins with the first range reduced: the shards' step count grows.
    if (zero_ && zero_->overlaps_step() && zero_->optimizer().step_count(0) > s)
      ++steps_begun_in_backward;
    std::vector<Tensor> params;
    if (zero_) {
      zero_->finish_gradient_sync();
      params = zero_->shard_params();
    } else {
      dp_->finish_gradient_sync();
      masters_->grads_to_master();
      params = masters_->masters();
    }
    losses.push_back(step_loss);
    if (s == 0) {
      grad_bytes = memory_stats(kCPU).current_bytes - start_bytes;
      host_grad_bytes = memory_stats(kHost).current_bytes - start_host_bytes;
      peak_grad_bytes = memory_stats(kCPU).peak_bytes - start_bytes;
    }
    const bool found_inf = scaler_ ? scaler_->unscale(params) : false;
    double norm = -1;
    if (case_.clip > 0 && !found_inf)
      norm = zero_ ? zero_->clip_grad_norm(case_.clip) : optim::clip_grad_norm(params, case_.clip);
    norms.push_back(norm);
    const int64_t before = memory_stats(kCPU).current_bytes;
    const int64_t host_before = memory_stats(kHost).current_bytes;
    if (scaler_) {
      scaler_->step(optimizer());
    } else if (zero_) {
      zero_->step();
    } else {
      optimizer_->step();
    }
    // The first step that updates creates the state (a skipped one does not).
    if (state_bytes == 0 && host_state_bytes == 0) {
      state_bytes = memory_stats(kCPU).current_bytes - before;
      host_state_bytes = memory_stats(kHost).current_bytes - host_before;
    }
    if (zero_) {
      zero_->gather_parameters();
      zero_->zero_grad();
    } else {
      masters_->master_to_model();
      masters_->zero_grad();
    }
  }

  // Every parameter's f32 master, whole.
  std::vector<Tensor> masters() {
    if (!zero_) {
      std::vector<Tensor> out;
      for (const Tensor& m : masters_->masters()) out.push_back(m.detach().clone());
      return out;
    }
    std::vector<Tensor> out;
    for (const Tensor& p : model_.parameters()) out.push_back(zeros(p.shape()));
    zero_->gather_masters(out);
    return out;
  }
  std::vector<Tensor> params() {
    const Stage3Params::GatherWindow window(zero_ ? zero_->stage3() : nullptr);
    std::vector<Tensor> out;
    // Copies: an f32 parameter's to() is the parameter itself, which stage 3 releases again.
    for (const Tensor& p : model_.parameters()) out.push_back(p.detach().to(DType::f32).clone());
    return out;
  }
  optim::OptimizerState state() {
    optim::OptimizerState s = zero_ ? zero_->state_dict() : optimizer_->state_dict();
    for (auto& [name, t] : s.tensors) t = t.clone();
    return s;
  }
  void load(const optim::OptimizerState& state, const std::vector<Tensor>& masters) {
    autograd::NoGradGuard no_grad;
    if (zero_) {
      zero_->load_masters(masters);
      zero_->gather_parameters();
      zero_->load_state_dict(state);
      return;
    }
    for (size_t i = 0; i < masters.size(); ++i) masters_->masters()[i].copy_(masters[i]);
    masters_->master_to_model();
    optimizer_->load_state_dict(state);
  }

  int64_t skipped() const { return scaler_ ? scaler_->skipped_steps() : 0; }
  const ShardedOptimizer* zero() const { return zero_.get(); }

  std::vector<double> norms, losses;
  int64_t built_device_bytes = 0, built_host_bytes = 0;  // held after the ShardedOptimizer's build
  int64_t steps_begun_in_backward = 0;                    // overlapped: see step()
  int64_t host_state_bytes = 0, host_grad_bytes = 0;     // as below, in the offload host domain
  int64_t state_bytes = 0;  // what the first optimizer step allocated: the optimizer state
  int64_t grad_bytes = 0;   // held after the first step's reduction: the gradients the step reads
  int64_t peak_grad_bytes = 0;  // the first step's peak above its start (backward and reduction)
  int64_t reduces_in_backward_ = 0;

 private:
  int stage_;
  Case case_;
  std::shared_ptr<Communicator> comm_;
  Mlp model_;
  std::unique_ptr<optim::MasterWeights> masters_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<DataParallel> dp_;
  std::unique_ptr<ShardedOptimizer> zero_;
  std::unique_ptr<optim::DynamicLossScaler> scaler_;
};

struct Diff {
  double max_diff = 0, max_ref = 0;
};
Diff diff(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  RANK_CHECK(got.size() == want.size(), got.size(), " vs ", want.size());
  Diff d;
  for (size_t i = 0; i < got.size(); ++i) {
    RANK_CHECK(got[i].shape() == want[i].shape(), got[i].describe(), " vs ", want[i].describe());
    const Tensor a = got[i].contiguous(), b = want[i].contiguous();
    for (int64_t k = 0; k < a.numel(); ++k) {
      d.max_diff = std::max(d.max_diff, double(std::fabs(a.data<float>()[k] - b.data<float>()[k])));
      d.max_ref = std::max(d.max_ref, double(std::fabs(b.data<float>()[k])));
    }
  }
  return d;
}

void check_close(const std::vector<Tensor>& got, const std::vector<Tensor>& want, double tol,
                 const std::string& what) {
  const Diff d = diff(got, want);
  RANK_CHECK(d.max_diff <= tol * d.max_ref, what, ": max |diff| ", d.max_diff, " > ", tol,
             " x max |ref| ", d.max_ref);
}

void check_states_close(const optim::OptimizerState& got, const optim::OptimizerState& want,
                        const std::string& what) {
  RANK_CHECK(got.meta == want.meta, what, ": meta ", got.meta.dump(), " vs ", want.meta.dump());
  RANK_CHECK(got.tensors.size() == want.tensors.size(), what, ": ", got.tensors.size(), " vs ",
             want.tensors.size(), " tensors");
  for (size_t i = 0; i < got.tensors.size(); ++i) {
    RANK_CHECK(got.tensors[i].first == want.tensors[i].first, what, ": '", got.tensors[i].first,
               "' vs '", want.tensors[i].first, "'");
    check_close({got.tensors[i].second}, {want.tensors[i].second}, 1e-6,
                what + " " + got.tensors[i].first);
  }
}

void check_case(const Case& c, const std::shared_ptr<Communicator>& comm) {
  constexpr int64_t kSteps = 6;
  Run base(0, c, comm);
  for (int64_t s = 0; s < kSteps; ++s) base.step(s);
  const std::vector<Tensor> want = base.masters();
  int64_t stage1_peak = 0;
  for (int stage : {1, 2, 3}) {
    const std::string what = str_cat(c.name, " stage ", stage);
    Run run(stage, c, comm);
    for (int64_t s = 0; s < kSteps; ++s) run.step(s);
    const Diff d = diff(run.masters(), want);
    check_close(run.masters(), want, c.tol, what + " masters");
    // The model's parameters (16-bit: the rounded masters) equal stage 0's.
    check_close(run.params(), base.params(), c.dtype == DType::f32 ? c.tol : 1e-2,
                what + " params");
    RANK_CHECK(run.skipped() == base.skipped(), what, ": skipped ", run.skipped(), " vs ",
               base.skipped());
    for (size_t s = 0; s < base.norms.size(); ++s)
      RANK_CHECK(std::fabs(run.norms[s] - base.norms[s]) <= 1e-6 * std::fabs(base.norms[s]) + 1e-12,
                 what, ": step ", s, " norm ", run.norms[s], " vs ", base.norms[s]);
    if (c.scaler)
      RANK_CHECK(base.skipped() > 0 && base.skipped() < kSteps, what,
                 ": expected the init scale to overflow in some steps, got ", base.skipped(),
                 " skipped");
    if (stage >= 2 && comm->size() > 1)
      RANK_CHECK(run.reduces_in_backward_ > 0, what, ": expected reduces started during backward");
    // Optimizer state per rank: about 1/N of stage 0's (the shards' padding aside).
    const double ratio = double(run.state_bytes) / double(base.state_bytes);
    int64_t shard_elems = 0;
    for (const Tensor& t : run.zero()->shard_params()) shard_elems += t.numel();
    const int64_t states = c.optimizer.at("type") == "sgd" ? 1 : 2;
    RANK_CHECK(run.state_bytes == states * 4 * shard_elems, what, ": state bytes ", run.state_bytes,
               " for ", shard_elems, " shard elements");
    RANK_CHECK(ratio <= 1.05 / comm->size(), what, ": state bytes ", run.state_bytes,
               " vs stage 0's ", base.state_bytes, " (ratio ", ratio, ")");
    // After the reduction only the shard's f32 gradient is left (stage 0 keeps every gradient).
    RANK_CHECK(run.grad_bytes == 4 * shard_elems, what, ": ", run.grad_bytes,
               " bytes of gradients held after the reduction, expected the shards' ",
               4 * shard_elems);
    RANK_CHECK(run.grad_bytes * comm->size() <= base.grad_bytes * 105 / 100, what,
               ": gradient bytes ", run.grad_bytes, " vs stage 0's ", base.grad_bytes);
    // Stage 2 releases each gradient into a bucket as it arrives and keeps only buckets in flight
    // and its shard: on a deep model its step peaks below stage 1's (which holds every gradient).
    if (stage == 1) stage1_peak = run.peak_grad_bytes;
    if (stage == 2 && c.check_peak)
      RANK_CHECK(run.peak_grad_bytes < stage1_peak, what, ": step peak ", run.peak_grad_bytes,
                 " bytes, stage 1's ", stage1_peak);
    // The checkpoint state is the plain optimizer's, by name.
    check_states_close(run.state(), base.state(), what + " state_dict");
    if (comm->rank() == 0)
      std::printf(
          "  %s: max |diff| %.3g (%s), max grad norm %.3g (clip %g), %lld skipped, state bytes "
          "per rank %lld vs %lld (%.3f), gradient bytes held %lld vs %lld, step peak %lld vs "
          "%lld\n",
          what.c_str(), d.max_diff, d.max_diff == 0 ? "bit-identical" : "within tolerance",
          *std::max_element(base.norms.begin(), base.norms.end()), c.clip,
          static_cast<long long>(run.skipped()), static_cast<long long>(run.state_bytes),
          static_cast<long long>(base.state_bytes), ratio, static_cast<long long>(run.grad_bytes),
          static_cast<long long>(base.grad_bytes), static_cast<long long>(run.peak_grad_bytes),
          static_cast<long long>(base.peak_grad_bytes));
  }
}

// A stage 0 checkpoint resumes under ZeRO and a ZeRO one under stage 0, with the same next steps.
void check_resume(const Case& c, const std::shared_ptr<Communicator>& comm) {
  Run base(0, c, comm);
  for (int64_t s = 0; s < 2; ++s) base.step(s);
  const optim::OptimizerState base_state = base.state();
  const std::vector<Tensor> base_masters = base.masters();
  for (int64_t s = 2; s < 4; ++s) base.step(s);
  for (int stage : {1, 2, 3}) {
    const std::string what = str_cat(c.name, " resume stage ", stage);
    Run into_zero(stage, c, comm);
    into_zero.load(base_state, base_masters);
    for (int64_t s = 2; s < 4; ++s) into_zero.step(s);
    check_close(into_zero.masters(), base.masters(), c.tol, what + ": stage 0 -> zero");

    Run zero(stage, c, comm);
    for (int64_t s = 0; s < 2; ++s) zero.step(s);
    Run into_plain(0, c, comm);
    into_plain.load(zero.state(), zero.masters());
    for (int64_t s = 2; s < 4; ++s) into_plain.step(s);
    check_close(into_plain.masters(), base.masters(), c.tol, what + ": zero -> stage 0");
  }
}

// Offload against the same stage without it: the same losses and masters bit for bit (the host
// steps the same shards with the same kernel), and the bytes moved from the device's counters to
// the host's. S = this rank's shard elements; per S: masters 4, their gradient 4, AdamW state 8.
void check_offload(const Case& c, const std::shared_ptr<Communicator>& comm) {
  constexpr int64_t kSteps = 4;
  for (int stage : {1, 2, 3}) {
    const std::string what = str_cat(c.name, " stage ", stage, " offload");
    Run plain(stage, c, comm);
    for (int64_t s = 0; s < kSteps; ++s) plain.step(s);
    Run off(stage, c, comm, /*offload=*/true);
    for (int64_t s = 0; s < kSteps; ++s) off.step(s);
    RANK_CHECK(off.zero()->offloaded() && off.zero()->shard_device() == kHost, what,
               ": expected the shards in the host domain");
    RANK_CHECK(off.losses == plain.losses, what, ": losses differ from the run without offload");
    const Diff d = diff(off.masters(), plain.masters());
    RANK_CHECK(d.max_diff == 0, what, ": masters differ by ", d.max_diff);
    check_close(off.params(), plain.params(), 0, what + " params");
    RANK_CHECK(off.skipped() == plain.skipped(), what, ": skipped ", off.skipped(), " vs ",
               plain.skipped());

    int64_t shard = 0;
    for (const Tensor& t : off.zero()->shard_params()) shard += t.numel();
    // Stage 3 f32 computes on its masters; under offload the device keeps a copy of them.
    const bool compute_copy = stage == 3 && c.dtype == DType::f32;
    RANK_CHECK(off.built_host_bytes == 4 * shard, what, ": host bytes after the build ",
               off.built_host_bytes, ", expected the masters' ", 4 * shard);
    RANK_CHECK(off.built_device_bytes == plain.built_device_bytes - (compute_copy ? 0 : 4 * shard),
               what, ": device bytes after the build ", off.built_device_bytes, " vs ",
               plain.built_device_bytes, " without offload");
    RANK_CHECK(off.state_bytes == 0 && off.host_state_bytes == 8 * shard &&
                   plain.state_bytes == 8 * shard && plain.host_state_bytes == 0,
               what, ": optimizer state on the device ", off.state_bytes, " (without offload ",
               plain.state_bytes, "), on the host ", off.host_state_bytes, ", expected ", 8 * shard);
    RANK_CHECK(off.grad_bytes == 0 && off.host_grad_bytes == 4 * shard &&
                   plain.grad_bytes == 4 * shard && plain.host_grad_bytes == 0,
               what, ": reduced gradients on the device ", off.grad_bytes, " (without offload ",
               plain.grad_bytes, "), on the host ", off.host_grad_bytes);
    if (comm->rank() == 0)
      std::printf(
          "  %s: losses and masters bit-identical; device bytes per rank: build %lld vs %lld, "
          "state %lld vs %lld, gradients %lld vs %lld; host: masters %lld, state %lld, gradients "
          "%lld\n",
          what.c_str(), static_cast<long long>(off.built_device_bytes),
          static_cast<long long>(plain.built_device_bytes),
          static_cast<long long>(off.state_bytes), static_cast<long long>(plain.state_bytes),
          static_cast<long long>(off.grad_bytes), static_cast<long long>(plain.grad_bytes),
          static_cast<long long>(off.built_host_bytes),
          static_cast<long long>(off.host_state_bytes),
          static_cast<long long>(off.host_grad_bytes));
  }
  // Checkpoints: an offloaded run's state is the plain optimizer's and resumes a plain stage 0 run
  // and an offloaded stage 3 one. (Not with a loss scaler: its scale is no optimizer state.)
  if (c.scaler) return;
  Run base(0, c, comm);
  for (int64_t s = 0; s < 4; ++s) base.step(s);
  Run off(2, c, comm, /*offload=*/true);
  for (int64_t s = 0; s < 2; ++s) off.step(s);
  Run into_plain(0, c, comm);
  into_plain.load(off.state(), off.masters());
  for (int64_t s = 2; s < 4; ++s) into_plain.step(s);
  check_close(into_plain.masters(), base.masters(), c.tol, c.name + " offload -> stage 0");
  Run into_off(3, c, comm, /*offload=*/true);
  into_off.load(off.state(), off.masters());
  for (int64_t s = 2; s < 4; ++s) into_off.step(s);
  check_close(into_off.masters(), base.masters(), c.tol, c.name + " offload -> stage 3 offload");
}

// The overlapped offload step (the host steps each shard range as its reduction completes, during
// backward) against the offloaded step after backward, without clipping: the same losses, masters
// and parameters bit for bit, and in a deep model every step began during backward.
void check_overlap(Case c, const std::shared_ptr<Communicator>& comm) {
  constexpr int64_t kSteps = 4;
  c.clip = 0;
  for (int stage : {2, 3}) {
    const std::string what = str_cat(c.name, " without clipping, stage ", stage, " overlapped");
    Run after(stage, c, comm, /*offload=*/true);
    Run overlapped(stage, c, comm, /*offload=*/true, /*overlap=*/true);
    for (int64_t s = 0; s < kSteps; ++s) {
      after.step(s);
      overlapped.step(s);
    }
    RANK_CHECK(overlapped.losses == after.losses, what, ": losses differ from the step after "
                                                        "backward");
    const Diff d = diff(overlapped.masters(), after.masters());
    RANK_CHECK(d.max_diff == 0, what, ": masters differ by ", d.max_diff);
    check_close(overlapped.params(), after.params(), 0, what + " params");
    // Backward reaches the first layers last, and rank 0 owns their ranges: in a one-layer model
    // they may all reduce at the end. With 12 layers every rank has ranges reduced before.
    if (c.hidden > 1)
      RANK_CHECK(overlapped.steps_begun_in_backward == kSteps, what, ": ",
                 overlapped.steps_begun_in_backward, " of ", kSteps,
                 " steps had begun before backward ended");
    RANK_CHECK(overlapped.zero()->optimizer().step_count(0) == kSteps, what, ": step count ",
               overlapped.zero()->optimizer().step_count(0));
    if (comm->rank() == 0)
      std::printf("  %s: losses and masters bit-identical, %lld of %lld steps begun during "
                  "backward on rank 0\n",
                  what.c_str(), static_cast<long long>(overlapped.steps_begun_in_backward),
                  static_cast<long long>(kSteps));
  }
}

void check_errors(const std::shared_ptr<Communicator>& comm) {
  Mlp model;
  auto groups = optim::param_groups_with_decay(model.named_parameters(), 0.1);
  bool threw = false;
  try {
    ShardedOptimizer z(model.named_parameters(), groups, {{"type", "lamb"}}, comm, {.stage = 1});
  } catch (const ValueError& e) {
    threw =
        std::string(e.what()).find("optimizer.type lamb with zero.stage 1") != std::string::npos;
  }
  RANK_CHECK(threw, "lamb under ZeRO must be refused naming optimizer.type");
  threw = false;
  try {
    ShardedOptimizer z(model.named_parameters(), groups, {{"type", "adamw"}}, comm, {.stage = 4});
  } catch (const ValueError& e) {
    threw = std::string(e.what()).find("expected stage 1") != std::string::npos;
  }
  RANK_CHECK(threw, "stage 4 must be refused");
  threw = false;
  try {
    ShardedOptimizer z(model.named_parameters(), groups, {{"type", "sgd"}}, comm,
                       {.stage = 2, .offload = true});
  } catch (const ValueError& e) {
    threw = std::string(e.what()).find("optimizer.type sgd with zero.offload") != std::string::npos;
  }
  RANK_CHECK(threw, "sgd with offload must be refused naming optimizer.type and zero.offload");
  for (const ZeroOptions& o : {ZeroOptions{.stage = 1, .offload = true, .overlap_step = true},
                               ZeroOptions{.stage = 2, .overlap_step = true}}) {
    threw = false;
    try {
      ShardedOptimizer z(model.named_parameters(), groups, {{"type", "adamw"}}, comm, o);
    } catch (const ValueError& e) {
      threw = std::string(e.what()).find("expected the overlapped step with offload at stage 2 "
                                         "or 3") != std::string::npos;
    }
    RANK_CHECK(threw, "the overlapped step at stage ", o.stage, o.offload ? " with" : " without",
               " offload must be refused");
  }
  // Found-inf is agreed before any rank acts: one rank's flag reaches every rank.
  ShardedOptimizer z(model.named_parameters(), groups, {{"type", "adamw"}}, comm, {.stage = 2});
  const optim::FoundInfReducer agree = z.found_inf_reducer();
  RANK_CHECK(agree(comm->rank() == comm->size() - 1),
             "found-inf on the last rank only must reach all");
  RANK_CHECK(!agree(false), "no rank found inf");
}

}  // namespace
}  // namespace tessera::parallel::zero

using namespace tessera;
using namespace tessera::parallel;

int main(int argc, char** argv) {
  return run_distributed(argc, argv, [](const std::shared_ptr<Communicator>& world) {
    using zero::Case;
    const nlohmann::json adamw = {{"type", "adamw"}, {"lr", 1e-2}, {"weight_decay", 0.1}};
    const nlohmann::json sgd = {{"type", "sgd"}, {"lr", 1e-2}, {"momentum", 0.9}};
    const std::vector<Case> cases = {
        {.name = "f32 adamw, clip, 2 micro-steps", .optimizer = adamw},
        {.name = "f32 sgd momentum, clip, 1 micro-step",
         .optimizer = sgd,
         .accum = 1,
         .clip = 0.05},
        {.name = "f16 adamw, loss scaling, clip",
         .optimizer = adamw,
         .dtype = DType::f16,
         .scaler = true,
         .init_scale = 65536.0},
        {.name = "bf16 adamw, clip, 3 micro-steps",
         .optimizer = adamw,
         .dtype = DType::bf16,
         .accum = 3},
        {.name = "f32 adamw, 12 hidden layers, 1 micro-step",
         .optimizer = adamw,
         .accum = 1,
         .hidden = 12,
         .check_peak = true},
    };
    if (world->rank() == 0) std::printf("zero on %d ranks:\n", world->size());
    for (const Case& c : cases) zero::check_case(c, world);
    for (size_t k : {size_t(0), size_t(2), size_t(3)}) zero::check_offload(cases[k], world);
    for (size_t k : {size_t(0), size_t(3), size_t(4)}) zero::check_overlap(cases[k], world);
    zero::check_resume(cases[0], world);
    zero::check_resume(cases[3], world);
    zero::check_errors(world);
    world->barrier()->wait();
    if (world->rank() == 0)
      std::printf("zero: all checks passed on %d ranks (%lld checks on rank 0)\n", world->size(),
                  static_cast<long long>(testing::checks_passed()));
    return 0;
  });
}

// The training loop (see trainer.h). One optimizer step: accumulate micro-batch gradients (data
// parallel all-reduce started by backward on the last one), average the loss over ranks, move
// gradients to the f32 masters, unscale (f16), clip, step (or skip), copy masters back. On a GPU
// the model, masters, optimizer state and batches live there and gradients are reduced over NCCL;
// agreement calls and metric sums stay on the host over MPI.
#include "models/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <sstream>
#include <thread>
#include <tuple>
#include <utility>

#include "autograd/ops.h"
#include "core/allocator.h"
#include "core/error.h"
#include "core/factory.h"
#include "core/parallel.h"
#include "core/profiler.h"
#include "models/train/checkpoint_root.h"
#include "models/train/engine.h"
#include "models/train/interrupt.h"
#include "models/train/pipeline_state.h"
#include "models/train/pipeline_step.h"
#include "models/train/progress.h"
#include "models/train/run_layout.h"
#include "models/train/sharded_state.h"
#include "models/train/step_profile.h"
#include "models/train/task.h"
#include "models/train/train_device.h"
#include "models/train/train_state.h"
#include "models/train/trainer_impl.h"
#include "models/train/update_engine.h"
#include "models/train/zero_build.h"
#include "optim/param_math.h"
#include "parallel/comm/agreed.h"
#include "parallel/comm/config_check.h"
#include "parallel/mesh/parallel_context.h"
#include "parallel/zero/offload.h"
#include "parallel/zero/sharded_optimizer.h"

namespace tessera::train {

using nlohmann::json;

namespace {

// zero.offload_params and its placement keys as stage 3's parameter placement.
parallel::zero::ParamPlacement zero_placement(const ZeroSection& z) {
  if (!z.offload_params) return {};
  return {.policy = z.placement,
          .host_fraction = z.offload_param_frac,
          .device_limit = z.device_memory_limit,
          .chunk_bytes = int64_t(z.chunk_mb * 1024 * 1024)};
}

// Every world rank's `value`, indexed by world rank: one all-gather of 8 bytes per rank (no world:
// this process's value alone). Collective: every rank calls it at the same point of the run.
std::vector<int64_t> gather_over_world(parallel::Communicator* world, int64_t value) {
  if (!world || world->size() == 1) return {value};
  const Tensor local = from_vector<int64_t>({value}, {1});
  Tensor all = empty({int64_t(world->size())}, {.dtype = DType::i64});
  world->all_gather(local, all)->wait();
  const int64_t* values = all.data<int64_t>();
  return std::vector<int64_t>(values, values + world->size());
}

}  // namespace

namespace detail {

DType precision_dtype(const std::string& name) {
  if (name == "bf16") return DType::bf16;
  if (name == "f16") return DType::f16;
  return DType::f32;
}

uint64_t rng_seed(const TrainConfig& c, int64_t data_rank) {
  return c.train.seed * 0x9E3779B97F4A7C15ull + uint64_t(data_rank) + 1;
}

// Each step is agreed (run_agreed): a failure on any rank stops every rank at the same point.
void Trainer::setup() {
  const int world_size = world_ ? world_->size() : 1;
  if (config_.parallel_auto) auto_layout_ = choose_auto_layout(config_, world_.get());
  run_agreed(world_.get(), [&] {
    accum_ = resolve_layout(config_, world_size);
    config_.parallel.validate(world_size);
    device_ = resolve_train_device(config_.train.device, world_ ? world_->rank() : 0);
  });
  set_threads(config_, world_size);
  // Before any rank looks for a checkpoint: rank 0 locks checkpoint.dir (one run at a time),
  // clears interrupted saves and refuses to mix a fresh run with an earlier one's checkpoints.
  run_agreed(world_.get(), [&] { checkpoint_root_ = lock_checkpoint_dir(); });
  context_ = make_context();
  data_rank_ = context_ ? context_->coord("data") : 0;
  std::vector<Tensor> zero_masters;
  run_agreed(world_.get(), [&] {
    init_gen_ = Generator(config_.train.seed);
    manual_seed(rng_seed(config_, data_rank_));
    std::tie(task_, zero_masters) = build_task();
    if (pipelined())
      pipeline_ = std::make_unique<PipelineStep>(*task_, *context_, int(accum_), device_);
    if (const DType dtype = precision_dtype(config_.precision.dtype); dtype != DType::f32)
      task_->model().to(dtype);
  });
  // Its own agreed step: building it is collective over the data group (broadcast, layout check).
  run_agreed(world_.get(), [&] { update_ = make_update(std::move(zero_masters)); });
  copies_.emplace(context_.get(),
                  pipeline_ ? pipeline_->tied_parameters_held() : std::vector<std::string>());
  runner_ = pipeline_ ? pipelined_step_runner(*pipeline_, *update_, *context_->pipeline_group())
                      : serial_step_runner(*task_, *update_, accum_);
  run_agreed(world_.get(), [&] {
    schedule_.emplace(config_.schedule);
    scaler_ = make_loss_scaler();
    load_initial_state();
    progress_ = make_progress();
  });
}

std::unique_ptr<CheckpointRoot> Trainer::lock_checkpoint_dir() const {
  if (!rank0() || config_.checkpoint.dir.empty()) return nullptr;
  return std::make_unique<CheckpointRoot>(config_.checkpoint, [&](const std::string& m) {
    if (std::ostream* os = out()) *os << m << "\n";
  });
}

std::unique_ptr<parallel::ParallelContext> Trainer::make_context() const {
  if (!world_) return nullptr;
  // Ranks holding different configurations would deadlock in mismatched collectives.
  parallel::check_same_config(*world_, config_.source.dump());
  // On GPUs every group moves device tensors over NCCL and host tensors over MPI.
  return std::make_unique<parallel::ParallelContext>(config_.parallel,
                                                     context_world(world_, device_));
}

std::pair<std::unique_ptr<Task>, std::vector<Tensor>> Trainer::build_task() {
  TS_CHECK(make_task_ || config_.kind != ModelKind::custom, "config",
           "model.type custom is a model given through the C++ API (train::Engine with a "
           "ModelRecipe, models/train/engine.h); `tessera train` builds gpt, bert or vit");
  const TaskFactory make = make_task_ ? make_task_ : TaskFactory(make_task);
  const TaskContext task_context{.config = &config_,
                                 .data_rank = data_rank_,
                                 .data_size = config_.parallel.data,
                                 .init_gen = &init_gen_,
                                 .device = device_,
                                 // Layers split only where the layout says (tensor, pipeline or
                                 // sequence size > 1); a data-parallel-only context builds the
                                 // serial layers.
                                 .parallel = context_.get()};
  if (!sharded_build()) return {make(task_context), std::vector<Tensor>()};
  // ZeRO-3's sharded build: each rank keeps its master shards, drawn while the model is built.
  std::unique_ptr<Task> task;
  std::vector<Tensor> masters = build_sharded(
      {.dtype = precision_dtype(config_.precision.dtype),
       .groups = [this](const nn::Module& model) { return param_groups(model); },
       .ranks = replica_group()->size(),
       .rank = replica_group()->rank(),
       .shard_device =
           config_.zero.offload ? parallel::zero::offload_host_device(device_) : device_,
       .generators = {&init_gen_, &default_generator()}},
      [&]() -> const nn::Module& {
        task.reset();  // the probe's task goes before the real one is built
        task = make(task_context);
        return task->model();
      });
  return {std::move(task), std::move(masters)};
}

std::unique_ptr<UpdateEngine> Trainer::make_update(std::vector<Tensor> zero_masters) {
  // Gradients live on device_, so they are reduced by a communicator for that device (on a GPU,
  // the context's data group, whose NCCL half moves them).
  std::shared_ptr<parallel::Communicator> grad_group;
  if (replicas() > 1 || (config_.zero.stage > 0 && context_))
    grad_group = gradient_group(replica_group(), device_);
  nn::Module& model = task_->model();
  return make_update_engine(
      {.model = &model,
       .groups = param_groups(model),
       .optimizer = config_.optimizer,
       .grad_group = grad_group,
       .completed_after_backward =
           pipeline_ ? pipeline_->tied_parameters_held() : std::vector<std::string>(),
       .sync_groups =
           pipeline_ ? pipeline_->chunk_parameters() : std::vector<std::vector<std::string>>(),
       .zero_stage = int(config_.zero.stage),
       .zero_offload = config_.zero.offload,
       .zero_overlap_step = config_.zero.overlap_step,
       .zero_bucket_bytes = std::max<int64_t>(1, int64_t(config_.zero.bucket_mb * (1 << 20))),
       .zero3 = {.live_params = config_.zero.live_params,
                 .prefetch = int(config_.zero.prefetch),
                 .placement = zero_placement(config_.zero)},
       .zero3_masters = std::move(zero_masters)});
}

std::unique_ptr<optim::DynamicLossScaler> Trainer::make_loss_scaler() const {
  if (precision_dtype(config_.precision.dtype) != DType::f16) return nullptr;
  auto scaler = std::make_unique<optim::DynamicLossScaler>(config_.precision.loss_scale);
  // A rank sees only its shards' gradients (ZeRO, tensor parallelism): every rank must skip the
  // same steps, so the flag is agreed over the world before any rank acts on it.
  if (world_ && world_->size() > 1) {
    scaler->set_found_inf_reducer([world = world_](bool local) {
      Tensor flag = from_vector<int32_t>({local ? 1 : 0}, {1});
      world->all_reduce(flag, parallel::ReduceOp::max)->wait();
      return flag.data<int32_t>()[0] != 0;
    });
  }
  return scaler;
}

// Initial weights (model.init_from), then the latest checkpoint over them; the metrics file
// starts anew or drops the steps this run redoes.
void Trainer::load_initial_state() {
  if (!config_.init_from_hf.empty()) init_from_hf(config_.init_from_hf);
  if (std::optional<std::string> dir = checkpoint_to_resume(config_.checkpoint)) resume(*dir);
  if (rank0() && !config_.logging.metrics.empty()) {
    std::error_code ec;
    if (step_ == 0)
      std::filesystem::remove(config_.logging.metrics, ec);
    else
      truncate_metrics(config_.logging.metrics, step_);
  }
}

std::unique_ptr<Progress> Trainer::make_progress() const {
  return std::make_unique<Progress>(
      ProgressOptions{.out = config_.logging.progress ? out() : nullptr,
                      .live = options_.live,
                      .log_every = config_.logging.log_every,
                      .total_steps = config_.train.steps,
                      .unit = task_->unit(),
                      .metrics_path = rank0() ? config_.logging.metrics : std::string()});
}

std::vector<optim::ParamGroup> Trainer::param_groups(const nn::Module& model) const {
  std::vector<optim::ParamGroup> groups = optim::param_groups_with_decay(
      model.named_parameters(), std::max(0.0, config_.weight_decay));
  if (config_.weight_decay < 0) groups[0].weight_decay.reset();  // the optimizer's default
  return groups;
}

// The step's phases: forwards and backwards (the runner), gradients reduced, the loss agreed,
// unscaled, clipped, the optimizer step, the masters back into the model.
double Trainer::train_step(int64_t step, StepStats& stats) {
  TS_PROFILE("train_step", "step");
  const auto start = std::chrono::steady_clock::now();
  const double lr = schedule_->lr_at(step);
  update_->optimizer().set_lr(lr);
  const auto gathers = update_->gather_window();  // ZeRO-3: forward and backward gather
  // Dropout masks keyed by (this step, micro-batch, pipeline unit), so a stage that runs some of
  // the layers in the schedule's order draws the serial run's masks (nn::MicroBatchDropout).
  const uint64_t dropout_key =
      rng_seed(config_, data_rank_) ^ (0xD1B54A32D192ED03ull * uint64_t(step + 1));
  const double local_loss =
      runner_->forward_backward(config_.train.micro_batch_size, dropout_key, [&](Tensor loss) {
        if (accum_ > 1) loss = mul(loss, 1.0 / double(accum_));
        return scaler_ ? scaler_->scale_loss(loss) : loss;
      });
  {
    TS_PROFILE("reduce_gradients", "step");
    update_->finish_gradients();
  }
  const double loss = agreed_loss(local_loss, step);
  const bool found_inf = scaler_ && scaler_->unscale(update_->step_params());
  const double norm = config_.train.grad_clip > 0 && !found_inf ? clip_gradients(step, loss) : -1;
  {
    TS_PROFILE("optimizer", "step");
    if (scaler_)
      check_skips(!scaler_->step(update_->optimizer()), step + 1);
    else
      update_->step();
  }
  {
    TS_PROFILE("finish_step", "step");  // masters back into the parameters (gathered under ZeRO)
    update_->finish_step();
  }
  stats.step = step + 1;
  stats.loss = loss;
  stats.lr = lr;
  stats.grad_norm = norm;
  stats.units = config_.train.batch_size * task_->units_per_item();
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  step_seconds_.push_back(stats.seconds);
  stats.loss_scale = scaler_ ? scaler_->scale() : 0.0;
  stats.skipped_steps = scaler_ ? scaler_->skipped_steps() : 0;
  const MemoryStats memory = memory_stats(device_);
  stats.peak_bytes = memory.peak_bytes;
  stats.current_bytes = memory.current_bytes;
  stats.memory_device = device_.str();
  // Every rank's peak, for the metrics record only: every rank reads the same logging.metrics (the
  // config is checked equal across ranks), so all join the gather on the same steps, and a run
  // without a metrics file pays nothing. After the step's clock stopped, so its time leaves it out.
  if (!config_.logging.metrics.empty())
    stats.peak_bytes_ranks = gather_over_world(world_.get(), memory.peak_bytes);
  stats.engine = update_->step_metrics();
  return loss;
}

// The global batch's loss from this replica's micro-batch sum: the mean over the replicas (under
// sequence parallelism each rank's loss is S times its share: task.h). Every rank holds the same
// value, so all fail together on a non-finite one; the loss scaler cannot help there, since the
// forward pass that made this loss does not depend on the scale.
double Trainer::agreed_loss(double local_loss, int64_t step) {
  const double loss = sum_over_ranks(data_group(), {local_loss})[0] / double(accum_ * replicas());
  run_agreed(world_.get(), [&] {
    TS_CHECK(std::isfinite(loss), "train", "the loss is ", loss, " at step ", step + 1,
             ": training diverged (lower optimizer.lr, set train.grad_clip, or use precision.dtype "
             "f32); not training on garbage");
  });
  return loss;
}

// The global norm adds each serial parameter once: this rank's counted copies (param_copies.h),
// summed over the tensor and pipeline groups, which hold the model's other parts (under ZeRO the
// engine first sums the shards' partial norms over the data group).
double Trainer::clip_gradients(int64_t step, double loss) {
  TS_PROFILE("clip_gradients", "step");
  const std::vector<bool> counted = copies_->counted(task_->model().named_placements());
  parallel::Communicator* tensor_group =
      tensor_parallel() ? context_->tensor_group().get() : nullptr;
  parallel::Communicator* pipeline_group =
      pipeline_ ? context_->pipeline_group().get() : nullptr;
  const double norm = update_->clip_grad_norm(config_.train.grad_clip, counted, [&](double local) {
    return sum_over_ranks(pipeline_group, sum_over_ranks(tensor_group, {local}))[0];
  });
  run_agreed(world_.get(), [&] {
    TS_CHECK(scaler_ || std::isfinite(norm), "train", "the gradient norm is ", norm, " at step ",
             step + 1, " (loss ", loss, "): training diverged");
  });
  return norm;
}

// f16: a step skipped for inf/NaN gradients is normal while the scale settles, but a long run of
// them means the weights or activations no longer fit (every rank skips the same steps).
void Trainer::check_skips(bool skipped, int64_t step) {
  skipped_in_a_row_ = skipped ? skipped_in_a_row_ + 1 : 0;
  const int64_t limit = config_.precision.skip_limit;
  run_agreed(world_.get(), [&] {
    TS_CHECK(limit == 0 || skipped_in_a_row_ < limit, "train", "the loss scaler skipped ",
             skipped_in_a_row_, " steps in a row for inf/NaN gradients (steps ",
             step - skipped_in_a_row_ + 1, "-", step, ", loss scale now ", scaler_->scale(),
             "): training diverged (lower optimizer.lr, set train.grad_clip, or use "
             "precision.dtype bf16); precision.skip_limit sets how many skips stop a run");
  });
}

// The first signal any rank received (0: none), agreed so every rank stops after the same step.
int Trainer::agreed_signal() {
  if (!interrupts_) return 0;
  int signal = interrupts_->signal();
  if (world_ && world_->size() > 1) {
    Tensor flag = from_vector<int32_t>({signal}, {1});
    world_->all_reduce(flag, parallel::ReduceOp::max)->wait();
    signal = flag.data<int32_t>()[0];
  }
  return signal;
}

void Trainer::stop_on_signal(int signal) {
  std::string saved = "no checkpoint.dir is set, so nothing was saved";
  if (!config_.checkpoint.dir.empty()) {
    save(step_);
    saved = "checkpoint saved: " + io::checkpoint_dir(config_.checkpoint.dir, step_) +
            "; run the same command again to resume";
  }
  TS_FAIL("train", "stopped by ", signal_description(signal), " after step ", step_, " of ",
          config_.train.steps, "; ", saved);
}

void Trainer::evaluate(int64_t step) {
  const auto gathers = update_->gather_window();  // ZeRO-3: every rank's forward gathers
  EvalResult r =
      task_->evaluate(data_group(), config_.train.eval_batches, config_.train.micro_batch_size);
  last_eval_ = r;
  if (r.summary.empty()) return;
  summary_.last_eval = r.metrics;
  progress_->eval(step, r.metrics, r.summary);
}

void Trainer::header() {
  std::ostream* os = out();
  if (!os) return;
  const TrainConfig& c = config_;
  const TrainSection& t = c.train;
  char params[32];
  int64_t serial_params = 0;  // the serial model's count, whatever the split
  if (pipeline_) {
    for (const auto& [name, shape] : task_->pipeline_stage()->serial_parameters())
      serial_params += shape_numel(shape);
  } else {
    for (const auto& [name, p] : task_->model().named_placements())
      serial_params += shape_numel(p.global_shape);
  }
  std::snprintf(params, sizeof params, "%.2fM", double(serial_params) / 1e6);
  *os << "tessera train: " << model_kind_name(c.kind) << ", " << params << " parameters, "
      << c.precision.dtype << ", " << c.optimizer.value("type", "adamw") << " lr " << c.schedule.lr
      << " (" << c.schedule.type << " schedule)\n"
      << "  data: " << task_->data_description() << "\n"
      << "  ranks: " << (world_ ? world_->size() : 1) << " (data parallel " << c.parallel.data
      << ") | global batch " << t.batch_size;
  if (task_->units_per_item() > 1) *os << " x " << task_->units_per_item() << " " << task_->unit();
  *os << " | micro-batch " << t.micro_batch_size << " per rank x " << accum_ << " accumulation | "
      << "threads per rank: " << num_threads() << " | device " << device_.str()
      << (config_.train.device == "cuda" && world_ && world_->size() > 1 ? " (rank 0)" : "")
      << "\n";
  if (auto_layout_) *os << "  " << describe_auto_layout(*auto_layout_) << "\n";
  if (context_ && !device_.is_cpu() && context_->world_size() > 1)
    *os << "  collectives: " << context_->world()->backend()
        << " (every group: device tensors over NCCL, host tensors over MPI)\n";
  if (tensor_parallel()) {
    int64_t local = 0;
    for (const Tensor& p : task_->model().parameters()) local += p.numel();
    char held[32];
    std::snprintf(held, sizeof held, "%.2fM", double(local) / 1e6);
    *os << "  " << context_->describe_tensor() << "; each rank holds " << held
        << " parameters (its shards and the replicated norms, biases and positions)\n";
  }
  if (pipeline_) *os << pipeline_->describe() << "\n";
  if (c.parallel.sequence > 1) {
    // ViT's sequence is its patches and the class token, padded up to a multiple of the ranks.
    const int64_t s = c.parallel.sequence;
    const int64_t positions =
        c.kind == ModelKind::vit ? (c.vit.num_patches() + s) / s * s : c.seq_len();
    *os << "  " << context_->describe_sequence(positions) << "\n";
  }
  if (const std::string zero = update_->describe(); !zero.empty()) *os << zero << "\n";
  if (!resumed_from_.empty())
    *os << "  resumed from " << resumed_from_ << " at step " << step_ << "\n";
  if (!resume_notes_.empty()) {
    *os << "  warning: changed since the checkpoint, so this run will not equal an uninterrupted "
           "one:";
    for (const std::string& note : resume_notes_) *os << "\n    " << note;
    *os << "\n";
  }
  os->flush();
}

double Trainer::step_once() {
  if (!header_shown_) header();
  header_shown_ = true;
  StepStats stats;
  const double loss = train_step(step_, stats);
  ++step_;
  units_seen_ += stats.units;
  progress_->step(stats);
  if (!placement_reported_) {  // after this run's first step, when the warm-up has placed chunks
    placement_reported_ = true;
    if (const std::string report = update_->placement_report(); rank0() && !report.empty())
      progress_->message(report);
  }
  return loss;
}

TrainSummary Trainer::run() {
  header();
  header_shown_ = true;
  summary_.start_step = step_;
  const auto start = std::chrono::steady_clock::now();
  StepProfile profile(config_.train, world_ ? world_->rank() : 0, world_ ? world_->size() : 1);
  while (step_ < config_.train.steps) {
    profile.before_step(step_ + 1);
    summary_.losses.push_back(step_once());
    if (const std::string report = profile.after_step(step_); !report.empty() && rank0())
      progress_->message(report);
    const bool last = step_ == config_.train.steps;
    if (config_.train.eval_every > 0 && step_ % config_.train.eval_every == 0 && !last)
      evaluate(step_);
    if (const int signal = agreed_signal(); signal != 0 && !last) stop_on_signal(signal);
    if (config_.checkpoint.every > 0 && step_ % config_.checkpoint.every == 0 && !last) save(step_);
  }
  evaluate(step_);
  if (summary_.start_step < step_) save(step_);
  summary_.end_step = step_;
  summary_.skipped_steps = scaler_ ? scaler_->skipped_steps() : 0;
  // Every rank reaches this point (the loop's steps are agreed), so the gather cannot hang.
  summary_.peak_bytes_ranks = gather_over_world(world_.get(), memory_stats(device_).peak_bytes);
  const auto largest =
      std::max_element(summary_.peak_bytes_ranks.begin(), summary_.peak_bytes_ranks.end());
  summary_.peak_bytes = *largest;
  if (rank0() && !summary_.losses.empty()) {
    std::ostringstream os;
    os << "done: " << step_ - summary_.start_step << " steps in "
       << Progress::format_duration(
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count())
       << " | loss " << summary_.losses.front() << " -> " << summary_.losses.back();
    if (scaler_) os << " | " << summary_.skipped_steps << " steps skipped by the loss scaler";
    os << " | peak mem " << Progress::format_bytes(summary_.peak_bytes);
    if (summary_.peak_bytes_ranks.size() > 1)
      os << " on rank " << largest - summary_.peak_bytes_ranks.begin() << " (the largest of "
         << summary_.peak_bytes_ranks.size() << " ranks)";
    progress_->message(os.str());
    if (auto_layout_ && !step_seconds_.empty()) {
      std::vector<double> sorted = step_seconds_;
      std::sort(sorted.begin(), sorted.end());
      progress_->message(compare_auto_layout(*auto_layout_, sorted[sorted.size() / 2],
                                             summary_.peak_bytes,
                                             int(largest - summary_.peak_bytes_ranks.begin())));
    }
  }
  // Model parallel or ZeRO stage 3: the sample's forward passes are collective (stage 3 gathers
  // the parameters), so every rank runs them.
  const bool collective =
      (context_ && context_->forward_is_collective()) || config_.zero.stage == 3;
  if ((rank0() && options_.out) || collective) {
    std::ostringstream discarded;
    const auto gathers = update_->gather_window();
    task_->finish(rank0() && options_.out ? *options_.out : discarded);
  }
  return summary_;
}

}  // namespace detail

using detail::TaskFactory;
using detail::Trainer;

// The engine is the trainer: `tessera train` and a user's program run the same loop.
class Engine::Impl : public Trainer {
 public:
  using Trainer::Trainer;
};

Engine::Engine(const TrainConfig& config, std::shared_ptr<parallel::Communicator> world,
               const TrainerOptions& options)
    : impl_(std::make_unique<Impl>(config, std::move(world), options, TaskFactory())) {}

Engine::Engine(const TrainConfig& config, const ModelRecipe& recipe,
               std::shared_ptr<parallel::Communicator> world, const TrainerOptions& options)
    : impl_(std::make_unique<Impl>(config, std::move(world), options,
                                   [recipe](const TaskContext& ctx) {
                                     return make_recipe_task(recipe, ctx);
                                   })) {}

Engine::~Engine() = default;

TrainSummary Engine::fit() { return impl_->run(); }
double Engine::train_step() { return impl_->step_once(); }
EvalResult Engine::evaluate() {
  impl_->evaluate_now();
  return impl_->last_eval();
}
void Engine::save() { impl_->save_now(); }
int64_t Engine::step() const { return impl_->steps_done(); }
nn::Module& Engine::model() { return impl_->task().model(); }

TrainSummary run_training(const TrainConfig& config, std::shared_ptr<parallel::Communicator> world,
                          const TrainerOptions& options) {
  return Engine(config, std::move(world), options).fit();
}

}  // namespace tessera::train

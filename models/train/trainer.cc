// The training loop (see trainer.h). One optimizer step: accumulate micro-batch gradients (data
// parallel all-reduce started by backward on the last one), average the loss over ranks, move
// gradients to the f32 masters, unscale (f16), clip, step (or skip), copy masters back. On a GPU
// the model, masters, optimizer state and batches live there and gradients are reduced over NCCL;
// agreement calls and metric sums stay on the host over MPI.
#include "models/train/trainer.h"

#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "core/allocator.h"
#include "core/error.h"
#include "core/factory.h"
#include "core/parallel.h"
#include "core/profiler.h"
#include "models/nn/dropout.h"
#include "models/io/piece_checkpoint.h"
#include "models/train/checkpoint_root.h"
#include "models/train/engine.h"
#include "models/train/init_from.h"
#include "models/train/interrupt.h"
#include "models/train/pipeline_state.h"
#include "models/train/pipeline_step.h"
#include "models/train/step_profile.h"
#include "models/train/progress.h"
#include "models/train/run_layout.h"
#include "models/train/sharded_state.h"
#include "models/train/task.h"
#include "models/train/train_device.h"
#include "models/train/train_state.h"
#include "models/train/update_engine.h"
#include "optim/param_math.h"
#include "parallel/comm/config_check.h"
#include "parallel/mesh/parallel_context.h"
#include "parallel/zero/sharded_optimizer.h"

namespace tessera::train {

using nlohmann::json;

void run_agreed(parallel::Communicator* comm, const std::function<void()>& fn) {
  if (!comm || comm->size() == 1) return fn();
  std::exception_ptr error;
  try {
    fn();
  } catch (...) {
    error = std::current_exception();
  }
  Tensor flag = from_vector<int32_t>({error ? comm->rank() : INT_MAX}, {1});
  comm->all_reduce(flag, parallel::ReduceOp::min)->wait();
  const int first = flag.data<int32_t>()[0];
  if (first == INT_MAX) return;
  if (first == comm->rank()) std::rethrow_exception(error);
  comm->barrier()->wait();  // never completes: rank `first` aborts the job
  TS_FAIL("train", "rank ", first, " failed");
}

namespace {

DType precision_dtype(const std::string& name) {
  if (name == "bf16") return DType::bf16;
  if (name == "f16") return DType::f16;
  return DType::f32;
}

// zero.offload_params and its placement keys as stage 3's parameter placement.
parallel::zero::ParamPlacement zero_placement(const ZeroSection& z) {
  if (!z.offload_params) return {};
  return {.policy = z.placement,
          .host_fraction = z.offload_param_frac,
          .device_limit = z.device_memory_limit,
          .chunk_bytes = int64_t(z.chunk_mb * 1024 * 1024)};
}

// Rank-dependent so dropout masks differ across data-parallel ranks.
uint64_t rng_seed(const TrainConfig& c, int64_t data_rank) {
  return c.train.seed * 0x9E3779B97F4A7C15ull + uint64_t(data_rank) + 1;
}

// Builds the run's task: the bundled GPT, BERT or ViT (make_task) or a user's recipe.
using TaskFactory = std::function<std::unique_ptr<Task>(const TaskContext&)>;

class Trainer {
 public:
  // Collective: builds everything and resumes (setup).
  Trainer(const TrainConfig& config, std::shared_ptr<parallel::Communicator> world,
          const TrainerOptions& options, TaskFactory make)
      : config_(config), world_(std::move(world)), options_(options), make_task_(std::move(make)) {
    if (options_.handle_signals) interrupts_.emplace();
    setup();
  }

  TrainSummary run();
  // One step with its progress line (the loop's body without its evaluations and checkpoints).
  double step_once();
  void evaluate_now() { evaluate(step_); }
  void save_now() { save(step_); }
  int64_t steps_done() const { return step_; }
  Task& task() { return *task_; }
  const EvalResult& last_eval() const { return last_eval_; }

 private:
  void setup();
  void resume(const std::string& dir);
  // model.init_from {"hf": DIR} (init_from.h); a no-op when the run resumes from a checkpoint.
  void init_from_hf(const std::string& dir);
  void save(int64_t step);
  // checkpoint.format "sharded" (models/io/piece_checkpoint.h): every rank writes the pieces it
  // owns; a resume reads only the pieces this rank's layout needs, from any layout's checkpoint.
  void save_sharded(int64_t step);
  void resume_sharded(const std::string& dir);
  // The lowest pipeline stage holding each serial parameter (collective; empty without stages),
  // and the pieces this rank writes.
  std::map<std::string, int> stage_owners();
  std::vector<io::PieceWrite> owned_pieces(const std::map<std::string, int>& stage_owner);
  // state.json's trainer section, and restoring a run from it (both formats).
  json train_state(int64_t step, const json& optimizer_meta) const;
  void restore_run_state(const json& s, const std::string& dir);
  void check_finite_weights(int64_t step);
  void check_skips(bool skipped, int64_t step);
  int agreed_signal();
  [[noreturn]] void stop_on_signal(int signal);
  double train_step(int64_t step, StepStats& stats);
  void evaluate(int64_t step);
  void header();
  std::ostream* out() const { return rank0() ? options_.out : nullptr; }
  bool rank0() const { return !world_ || world_->rank() == 0; }
  bool tensor_parallel() const { return config_.parallel.tensor.size > 1; }
  bool pipelined() const { return config_.parallel.pipeline > 1; }
  double clip_gradients();
  // Pipeline checkpoints: the optimizer's numbering of this stage's and of the serial model's
  // parameters, and this stage's tensors of a serial checkpoint.
  ParamOrder local_order() const;
  ParamOrder serial_order() const;
  io::NamedTensors stage_tensors(const io::NamedTensors& serial, const std::string& dir) const;
  // The ranks holding replicas of this rank's part of the model, which average their gradients:
  // the data group, and under sequence parallelism data x sequence (each sequence rank sees its
  // own tokens of the same batch).
  const std::shared_ptr<parallel::Communicator>& replica_group() const {
    return context_->group(config_.parallel.sequence > 1 ? "data_sequence" : "data");
  }
  parallel::Communicator* data_group() const { return context_ ? replica_group().get() : nullptr; }
  int64_t replicas() const { return int64_t(config_.parallel.data) * config_.parallel.sequence; }

  TrainConfig config_;
  std::shared_ptr<parallel::Communicator> world_;
  TrainerOptions options_;
  TaskFactory make_task_;
  EvalResult last_eval_;
  bool header_shown_ = false;
  bool placement_reported_ = false;
  int64_t accum_ = 1;
  int64_t data_rank_ = 0;
  Device device_ = kCPU;
  std::shared_ptr<parallel::Communicator> grad_group_;  // reduces gradients on device_
  std::unique_ptr<parallel::ParallelContext> context_;
  Generator init_gen_;
  std::unique_ptr<Task> task_;
  // Gradient reduction, f32 masters, the optimizer and its checkpoint state: plain or ZeRO.
  std::unique_ptr<UpdateEngine> update_;
  std::unique_ptr<PipelineStep> pipeline_;  // parallel.pipeline > 1
  std::optional<optim::LrSchedule> schedule_;
  std::unique_ptr<optim::DynamicLossScaler> scaler_;
  std::unique_ptr<Progress> progress_;
  std::unique_ptr<CheckpointRoot> checkpoint_root_;  // rank 0 with a checkpoint.dir
  std::optional<InterruptWatch> interrupts_;
  std::vector<std::string> resume_notes_;  // settings changed since the checkpoint
  int64_t skipped_in_a_row_ = 0;
  int64_t step_ = 0;
  int64_t units_seen_ = 0;
  std::string resumed_from_;
  TrainSummary summary_;
};

void Trainer::setup() {
  const int world_size = world_ ? world_->size() : 1;
  run_agreed(world_.get(), [&] {
    accum_ = resolve_layout(config_, world_size);
    config_.parallel.validate(world_size);
    device_ = resolve_train_device(config_.train.device, world_ ? world_->rank() : 0);
  });
  set_threads(config_, world_size);
  // Before any rank looks for a checkpoint: rank 0 locks checkpoint.dir (one run at a time),
  // clears interrupted saves and refuses to mix a fresh run with an earlier one's checkpoints.
  run_agreed(world_.get(), [&] {
    if (!rank0() || config_.checkpoint.dir.empty()) return;
    checkpoint_root_ = std::make_unique<CheckpointRoot>(config_.checkpoint, [&](const std::string& m) {
      if (std::ostream* os = out()) *os << m << "\n";
    });
  });
  if (world_) {
    // Ranks holding different configurations would deadlock in mismatched collectives.
    parallel::check_same_config(*world_, config_.source.dump());
    context_ = std::make_unique<parallel::ParallelContext>(config_.parallel, world_);
    data_rank_ = context_->coord("data");
  }
  run_agreed(world_.get(), [&] {
    init_gen_ = Generator(config_.train.seed);
    manual_seed(rng_seed(config_, data_rank_));
    TS_CHECK(make_task_ || config_.kind != ModelKind::custom, "config",
             "model.type custom is a model given through the C++ API (train::Engine with a "
             "ModelRecipe, models/train/engine.h); `tessera train` builds gpt, bert or vit");
    task_ = (make_task_ ? make_task_ : TaskFactory(make_task))({.config = &config_,
                       .data_rank = data_rank_,
                       .data_size = config_.parallel.data,
                       .init_gen = &init_gen_,
                       .device = device_,
                       // Layers split only where the layout says (tensor, pipeline or sequence
                       // size > 1); a data-parallel-only context builds the serial layers.
                       .parallel = context_.get()});
    if (pipelined()) pipeline_ = std::make_unique<PipelineStep>(*task_, *context_, int(accum_));
    const DType dtype = precision_dtype(config_.precision.dtype);
    if (dtype != DType::f32) task_->model().to(dtype);
  });
  // Gradients live on device_, so they are reduced by a communicator for that device (NCCL over
  // the MPI data group on a GPU); the MPI group keeps the host-side sums.
  if (replicas() > 1 || (config_.zero.stage > 0 && context_))
    grad_group_ = gradient_group(replica_group(), device_);
  // Its own agreed block: building it is collective over the data group (broadcast, layout check).
  run_agreed(world_.get(), [&] {
    nn::Module& model = task_->model();
    std::vector<optim::ParamGroup> groups = optim::param_groups_with_decay(
        model.named_parameters(), std::max(0.0, config_.weight_decay));
    if (config_.weight_decay < 0) groups[0].weight_decay.reset();  // the optimizer's default
    update_ = make_update_engine({.model = &model,
                                  .groups = groups,
                                  .optimizer = config_.optimizer,
                                  .grad_group = grad_group_,
                                  .completed_after_backward =
                                      pipeline_ ? pipeline_->tied_parameters_held()
                                                : std::vector<std::string>(),
                                  .sync_groups = pipeline_ ? pipeline_->chunk_parameters()
                                                           : std::vector<std::vector<std::string>>(),
                                  .zero_stage = int(config_.zero.stage),
                                  .zero_offload = config_.zero.offload,
                                  .zero3 = {.live_params = config_.zero.live_params,
                                            .prefetch = int(config_.zero.prefetch),
                                            .placement = zero_placement(config_.zero)}});
  });
  run_agreed(world_.get(), [&] {
    schedule_.emplace(config_.schedule);
    if (precision_dtype(config_.precision.dtype) == DType::f16) {
      scaler_ = std::make_unique<optim::DynamicLossScaler>(config_.precision.loss_scale);
      // A rank sees only its shards' gradients (ZeRO, tensor parallelism): every rank must skip
      // the same steps, so the flag is agreed over the world before any rank acts on it.
      if (world_ && world_->size() > 1) {
        scaler_->set_found_inf_reducer([world = world_](bool local) {
          Tensor flag = from_vector<int32_t>({local ? 1 : 0}, {1});
          world->all_reduce(flag, parallel::ReduceOp::max)->wait();
          return flag.data<int32_t>()[0] != 0;
        });
      }
    }
    if (!config_.init_from_hf.empty()) init_from_hf(config_.init_from_hf);
    if (std::optional<std::string> dir = checkpoint_to_resume(config_.checkpoint)) resume(*dir);
    if (rank0() && !config_.logging.metrics.empty()) {
      std::error_code ec;  // a fresh run starts a fresh file; a resumed one drops what it redoes
      if (step_ == 0)
        std::filesystem::remove(config_.logging.metrics, ec);
      else
        truncate_metrics(config_.logging.metrics, step_);
    }
    progress_ = std::make_unique<Progress>(
        ProgressOptions{.out = config_.logging.progress ? out() : nullptr,
                        .live = options_.live,
                        .log_every = config_.logging.log_every,
                        .total_steps = config_.train.steps,
                        .unit = task_->unit(),
                        .metrics_path = rank0() ? config_.logging.metrics : std::string()});
  });
}

void Trainer::init_from_hf(const std::string& dir) {
  if (checkpoint_to_resume(config_.checkpoint)) {  // the checkpoint's weights are later ones
    if (std::ostream* os = out()) *os << "model.init_from " << dir << " ignored: resuming\n";
    return;
  }
  io::NamedTensors serial = hf_init_tensors(config_, dir);
  if (pipeline_) serial = stage_tensors(serial, dir);
  const Placements placements =
      tensor_parallel() ? model_state_placements(task_->model()) : Placements();
  update_->load_model(task_->model(),
                      init_tensors_for_rank(serial, task_->model(), config_.kind, placements, dir),
                      dir);
  if (std::ostream* os = out()) *os << "weights from Hugging Face " << dir << "\n";
}

void Trainer::resume(const std::string& dir) {
  if (io::is_piece_checkpoint(dir)) return resume_sharded(dir);
  io::CheckpointContents ck = io::load_checkpoint(dir);
  const json& s = ck.state;
  TS_CHECK(
      s.value("format", "") == kTrainStateFormat && s.contains("step") && s.contains("optimizer"),
      "checkpoint", dir, ": state.json is not a tessera trainer checkpoint");
  // The checkpoint holds serial tensors: under tensor parallelism each rank takes its shards.
  const Placements placements =
      tensor_parallel() ? model_state_placements(task_->model()) : Placements();
  optim::OptimizerState opt{s.at("optimizer"), ck.optimizer};
  if (pipeline_) {
    // This stage's tensors of the serial checkpoint, its state renumbered to its parameters.
    ck.model = stage_tensors(ck.model, dir);
    opt = renumber_state(opt, serial_order(), local_order());
  }
  update_->load_model(task_->model(), cut_named(ck.model, placements), dir);
  try {
    io::NamedTensors opt_tensors = opt.tensors;
    if (tensor_parallel()) {
      Placements by_name;
      for (const auto& [name, t] : opt_tensors)
        by_name.emplace(name, update_->state_placement(name, t, placements, task_->model()));
      opt_tensors = cut_named(opt_tensors, by_name);
    }
    update_->load_state_dict({opt.meta, opt_tensors});
  } catch (const std::exception& e) {
    TS_FAIL("checkpoint", dir, ": cannot resume from it: ", error_text(e));
  }
  restore_run_state(s, dir);
}

// The loss scaler, data position, RNG and step: the same in both formats.
void Trainer::restore_run_state(const json& s, const std::string& dir) {
  try {
    if (scaler_ && !s.at("scaler").is_null()) scaler_->load_state_dict(s.at("scaler"));
    task_->load_data_state(s.at("data"));
    default_generator().set_state(rng_seed(config_, data_rank_),
                                  s.at("rng_offset").get<uint64_t>());
    step_ = s.at("step").get<int64_t>();
    units_seen_ = s.value("units_seen", int64_t(0));
  } catch (const std::exception& e) {
    TS_FAIL("checkpoint", dir, ": cannot resume from it: ", error_text(e));
  }
  resumed_from_ = dir;
  resume_notes_ = resume_differences(checkpoint_config(s, dir), TrainConfig::from_json(config_.source));
}

void Trainer::resume_sharded(const std::string& dir) {
  const json s = io::load_checkpoint_state(dir);
  TS_CHECK(
      s.value("format", "") == kTrainStateFormat && s.contains("step") && s.contains("optimizer"),
      "checkpoint", dir, ": state.json is not a tessera trainer checkpoint");
  const io::PieceReader reader = io::PieceReader::open(dir);
  const nn::Module& model = task_->model();
  const Placements placements = model_state_placements(model);
  auto box_of = [&](const std::string& name, const Tensor& t) {
    auto it = placements.find(name);
    return it != placements.end() ? it->second : parallel::tensor::replicated(t.shape());
  };
  // Every model tensor of the checkpoint must belong to this model (to some stage of it).
  io::NamedTensors stored;
  std::map<std::string, std::vector<std::string>> optimizer_states;  // parameter -> state names
  for (const std::string& name : reader.names()) {
    std::string what, param;
    if (parse_optimizer_tensor_name(name, what, param))
      optimizer_states[param].push_back(what);
    else
      stored.emplace_back(name, Tensor());
  }
  std::set<std::string> held;
  for (const auto& [name, t] : model.state_dict()) held.insert(name);
  if (pipeline_) stored = stage_tensors(stored, dir);
  for (const auto& [name, t] : stored)
    TS_CHECK(held.count(name), "checkpoint", dir,
             ": model weights do not fit this model: unexpected tensor '", name, "'");
  // This rank's box of a tensor (or a flat range of it), read from only the pieces it meets.
  std::map<std::string, Tensor> local;
  for (const auto& [name, t] : model.state_dict()) local[name] = t;
  auto read = [&](const std::string& name, const std::string& param, int64_t offset,
                  int64_t numel) {
    const parallel::tensor::Placement p = box_of(param, local.at(param));
    if (numel < 0) return reader.read(name, local_box(p)).reshape(p.local_shape());
    return reader.read(name, local_box(p, offset, numel));
  };
  const ParamOrder order = local_order();
  json meta;
  try {
    meta = indexed_optimizer_meta(s.at("optimizer"), order);
  } catch (const std::exception& e) {
    TS_FAIL("checkpoint", dir, ": cannot resume from it: ", error_text(e));
  }
  // ZeRO reads just its ranges; the plain path whole local tensors.
  if (update_->load_own_pieces(task_->model(), meta, optimizer_states, read))
    return restore_run_state(s, dir);
  io::NamedTensors tensors;
  for (const auto& [name, t] : model.state_dict()) tensors.emplace_back(name, read(name, name, 0, -1));
  update_->load_model(task_->model(), tensors, dir);
  try {
    optim::OptimizerState opt{meta, {}};
    for (size_t k = 0; k < order.names.size(); ++k) {
      const std::string& param = order.names[k];
      for (const std::string& what : optimizer_states[param])
        opt.tensors.emplace_back("state." + std::to_string(k) + "." + what,
                                 read(optimizer_tensor_name(what, param), param, 0, -1));
    }
    update_->load_state_dict(opt);
  } catch (const std::exception& e) {
    TS_FAIL("checkpoint", dir, ": cannot resume from it: ", error_text(e));
  }
  restore_run_state(s, dir);
}

ParamOrder Trainer::local_order() const {
  std::vector<std::pair<std::string, Shape>> params;
  for (const auto& [name, p] : task_->model().named_parameters()) params.emplace_back(name, p.shape());
  return ParamOrder::of(params);
}

ParamOrder Trainer::serial_order() const {
  return ParamOrder::of(task_->pipeline_stage()->serial_parameters());
}

// Collective over the pipeline group: a tensor of the checkpoint that no stage holds means the
// checkpoint is another model's.
io::NamedTensors Trainer::stage_tensors(const io::NamedTensors& serial, const std::string& dir) const {
  std::set<std::string> mine;
  for (const auto& [name, t] : task_->model().state_dict()) mine.insert(name);
  io::NamedTensors out;
  Tensor held = zeros({int64_t(serial.size())}, {.dtype = DType::i32});
  for (size_t i = 0; i < serial.size(); ++i) {
    if (!mine.count(serial[i].first)) continue;
    out.push_back(serial[i]);
    held.data<int32_t>()[i] = 1;
  }
  context_->pipeline_group()->all_reduce(held, parallel::ReduceOp::max)->wait();
  for (size_t i = 0; i < serial.size(); ++i)
    TS_CHECK(held.data<int32_t>()[i] == 1, "checkpoint", dir,
             ": model weights do not fit this model: unexpected tensor '", serial[i].first, "'");
  return out;
}

// A checkpoint of non-finite weights would replace good ones (checkpoint.keep), so a run whose
// weights are inf or NaN stops instead; every rank checks its own copy and they agree.
void Trainer::check_finite_weights(int64_t step) {
  run_agreed(world_.get(), [&] {
    for (const auto& [name, p] : task_->model().named_parameters()) {
      TS_CHECK(optim::detail::all_finite(p), "train", "parameter '", name, "' holds inf or NaN after step ",
               step, ": training diverged; not saving a checkpoint of it (the earlier checkpoints "
               "are kept). Lower optimizer.lr or resume from an earlier checkpoint");
    }
    for (const Tensor& m : update_->step_params()) {  // every master, or this rank's shards
      TS_CHECK(optim::detail::all_finite(m), "train", "the f32 master weights hold inf or NaN after step ",
               step, ": training diverged; not saving a checkpoint of them (the earlier "
               "checkpoints are kept). Lower optimizer.lr or resume from an earlier checkpoint");
    }
  });
}

void Trainer::save(int64_t step) {
  if (config_.checkpoint.dir.empty()) return;
  check_finite_weights(step);
  if (config_.checkpoint.format == "sharded") return save_sharded(step);
  // Collective under ZeRO (gathered from the shards), so before rank 0 goes its own way.
  optim::OptimizerState opt = update_->state_dict();
  io::CheckpointContents ck;
  ck.model = update_->model_tensors(task_->model());
  ck.optimizer = opt.tensors;
  if (tensor_parallel()) {
    // Serial names and shapes: every rank takes part in the gathers, rank 0 writes.
    const Placements placements = model_state_placements(task_->model());
    Placements by_name;
    for (const auto& [name, t] : ck.optimizer)
      by_name.emplace(name, update_->state_placement(name, t, placements, task_->model()));
    ck.model = gather_named(ck.model, placements, *context_);
    ck.optimizer = gather_named(ck.optimizer, by_name, *context_);
  }
  if (pipeline_) {
    // The stages' pieces, renumbered serially, meet on pipeline rank 0 of data and tensor rank 0.
    optim::OptimizerState serial = renumber_state({opt.meta, ck.optimizer}, local_order(), serial_order());
    const bool writers = context_->coord("data") == 0 && context_->coord("sequence") == 0 &&
                         (!tensor_parallel() || context_->tensor_group()->rank() == 0);
    if (writers) gather_stages(*context_->pipeline_group(), ck.model, serial);
    opt.meta = serial.meta;
    ck.optimizer = serial.tensors;
  }
  if (!rank0()) return;
  ck.state = train_state(step, opt.meta);
  const std::string dir = io::checkpoint_dir(config_.checkpoint.dir, step);
  io::save_checkpoint(dir, ck);
  checkpoint_root_->prune();
  progress_->message("checkpoint saved: " + dir);
}

json Trainer::train_state(int64_t step, const json& optimizer_meta) const {
  const parallel::ParallelConfig& p = config_.parallel;
  return {{"format", kTrainStateFormat},
          {"version", 1},
          {"step", step},
          {"config", config_.source},
          {"optimizer", optimizer_meta},
          {"scaler", scaler_ ? scaler_->state_dict() : json()},
          {"rng_offset", default_generator().offset()},
          {"data", task_->data_state()},
          {"units_seen", units_seen_},
          // What `checkpoint inspect` shows; a resume reads neither.
          {"world_size", world_ ? world_->size() : 1},
          {"layout",
           {{"data", p.data},
            {"pipeline", p.pipeline},
            {"sequence", p.sequence},
            {"tensor", p.tensor.size},
            {"tensor_mode", p.tensor.mode},
            {"zero_stage", config_.zero.stage},
            {"format", config_.checkpoint.format}}}};
}

// Which of this rank's pieces it writes: a piece several ranks hold identically is written by one
// of them, decided without communication from its coordinates (data and sequence rank 0 for a
// data-parallel replica; tensor rank 0 for a tensor replicated over the tensor group; the copy at
// index 0 of 2.5D's depth replicas), except for a tensor two pipeline stages hold (a tied
// embedding): the lowest stage holding it writes it, agreed in one all-reduce.
std::map<std::string, int> Trainer::stage_owners() {
  const nn::Module& model = task_->model();
  std::map<std::string, int> stage_owner;
  if (pipeline_) {
    const auto& serial = task_->pipeline_stage()->serial_parameters();
    std::set<std::string> mine;
    for (const auto& [name, t] : model.named_parameters()) mine.insert(name);
    const int stage = context_->pipeline_group()->rank();
    Tensor owner = zeros({int64_t(serial.size())}, {.dtype = DType::i32});
    for (size_t i = 0; i < serial.size(); ++i)
      owner.data<int32_t>()[i] = mine.count(serial[i].first) ? stage : INT_MAX;
    context_->pipeline_group()->all_reduce(owner, parallel::ReduceOp::min)->wait();
    for (size_t i = 0; i < serial.size(); ++i) stage_owner[serial[i].first] = owner.data<int32_t>()[i];
  }
  return stage_owner;
}

std::vector<io::PieceWrite> Trainer::owned_pieces(const std::map<std::string, int>& stage_owner) {
  const nn::Module& model = task_->model();
  const bool data_first = !context_ || (context_->coord("data") == 0 && context_->coord("sequence") == 0);
  const bool tensor_first = !tensor_parallel() || context_->tensor_group()->rank() == 0;
  const int stage = pipeline_ ? context_->pipeline_group()->rank() : 0;
  const Placements placements = model_state_placements(model);
  std::vector<io::PieceWrite> out;
  for (StatePiece& piece : update_->checkpoint_pieces(model)) {
    if (piece.data_replicated && !data_first) continue;
    if (auto it = stage_owner.find(piece.param); it != stage_owner.end() && it->second != stage)
      continue;
    auto it = placements.find(piece.param);
    parallel::tensor::Placement p = it != placements.end()
                                        ? it->second
                                        : parallel::tensor::replicated(piece.data.shape());
    // State not shaped like its parameter (none of the bundled optimizers has any): its own.
    if (piece.flat_begin < 0 && piece.data.numel() != shape_numel(p.local_shape()))
      p = parallel::tensor::replicated(piece.data.shape());
    if (p.replicated() ? !tensor_first : !p.counted_copy()) continue;
    out.push_back({piece.name, local_box(p, piece.flat_begin, piece.data.numel()), piece.data});
  }
  return out;
}

// Every rank writes its pieces into one temporary directory; rank 0 merges the descriptors into
// the index, writes state.json and renames the directory into place. Each phase is agreed
// (run_agreed's all-reduce is also the barrier between them), so a failure anywhere stops every
// rank and leaves no partial checkpoint.
void Trainer::save_sharded(int64_t step) {
  const std::string dir = io::checkpoint_dir(config_.checkpoint.dir, step);
  const int rank = world_ ? world_->rank() : 0, ranks = world_ ? world_->size() : 1;
  const std::map<std::string, int> owners = stage_owners();  // collective under pipelines
  std::vector<io::PieceWrite> mine;
  try {
    run_agreed(world_.get(), [&] {
      mine = owned_pieces(owners);
      if (rank0()) io::begin_piece_directory(dir);
    });
    run_agreed(world_.get(), [&] {
      io::write_rank_pieces(dir, rank, mine, {{"optimizer", update_->named_meta(task_->model())}});
    });
    run_agreed(world_.get(), [&] {
      if (!rank0()) return;
      std::vector<json> metas;
      for (const json& extra : io::merge_rank_pieces(dir, ranks)) metas.push_back(extra.at("optimizer"));
      io::commit_piece_directory(dir, train_state(step, merge_named_meta(metas)));
    });
  } catch (...) {
    if (rank0()) io::abandon_piece_directory(dir);
    throw;
  }
  if (!rank0()) return;
  checkpoint_root_->prune();
  progress_->message("checkpoint saved: " + dir);
}

double Trainer::train_step(int64_t step, StepStats& stats) {
  TS_PROFILE("train_step", "step");
  const auto start = std::chrono::steady_clock::now();
  const double lr = schedule_->lr_at(step);
  update_->optimizer().set_lr(lr);
  const int64_t micro = config_.train.micro_batch_size;
  double local_loss = 0;
  auto to_backward = [&](Tensor loss) {
    if (accum_ > 1) loss = mul(loss, 1.0 / double(accum_));
    return scaler_ ? scaler_->scale_loss(loss) : loss;
  };
  // Dropout masks keyed by (this step, micro-batch, pipeline unit), so a stage that runs some of
  // the layers in the schedule's order draws the serial run's masks (nn::MicroBatchDropout).
  const uint64_t dropout_key = rng_seed(config_, data_rank_) ^ (0xD1B54A32D192ED03ull * uint64_t(step + 1));
  if (pipeline_) {
    // Gradients accumulate over the schedule and are reduced once. On the plain path each model
    // chunk's reduction starts within its final backward, the tied embedding's bucket last (it is
    // complete only once the stages have summed it); ZeRO's reducer starts after the schedule.
    update_->set_grad_sync(false);
    std::function<void(int)> sync_chunk;
    if (config_.zero.stage == 0) sync_chunk = [&](int chunk) { update_->sync_group(size_t(chunk)); };
    TS_PROFILE("pipeline_schedule", "step");
    local_loss = pipeline_->run(micro, dropout_key, to_backward, sync_chunk);
    pipeline_->reduce_tied_gradients();
    update_->set_grad_sync(true);
  } else {
    for (int64_t m = 0; m < accum_; ++m) {
      update_->set_grad_sync(m + 1 == accum_);  // only the last micro-batch reduces gradients
      Tensor loss;
      {
        TS_PROFILE("forward", "step");
        nn::MicroBatchDropout keyed(dropout_key, uint64_t(m));
        loss = task_->micro_loss(micro);
        local_loss += loss.item();
      }
      TS_PROFILE("backward", "step");
      autograd::backward({to_backward(loss)});
    }
  }
  {
    TS_PROFILE("reduce_gradients", "step");
    update_->finish_gradients();
  }
  double loss_sum = sum_over_ranks(data_group(), {local_loss})[0];
  if (pipeline_) loss_sum = sum_over_ranks(context_->pipeline_group().get(), {loss_sum})[0];
  // Under sequence parallelism each rank's loss is S times its share (task.h), so the mean over
  // the replicas is the global batch's loss.
  const double loss = loss_sum / double(accum_ * replicas());
  // Every rank holds the same averaged loss, so all fail together; rank 0 reports. The loss scaler
  // cannot help here: the forward pass that made this loss does not depend on the scale.
  run_agreed(world_.get(), [&] {
    TS_CHECK(
        std::isfinite(loss), "train", "the loss is ", loss, " at step ", step + 1,
        ": training diverged (lower optimizer.lr, set train.grad_clip, or use precision.dtype "
        "f32); not training on garbage");
  });
  bool found_inf = false;
  if (scaler_) found_inf = scaler_->unscale(update_->step_params());
  double norm = -1;
  if (config_.train.grad_clip > 0 && !found_inf) {
    TS_PROFILE("clip_gradients", "step");
    norm = clip_gradients();
    run_agreed(world_.get(), [&] {
      TS_CHECK(scaler_ || std::isfinite(norm), "train", "the gradient norm is ", norm, " at step ",
               step + 1, " (loss ", loss, "): training diverged");
    });
  }
  {
    TS_PROFILE("optimizer", "step");
    if (scaler_)
      check_skips(!scaler_->step(update_->optimizer()), step + 1);
    else
      update_->optimizer().step();
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
  stats.loss_scale = scaler_ ? scaler_->scale() : 0.0;
  stats.skipped_steps = scaler_ ? scaler_->skipped_steps() : 0;
  const MemoryStats memory = memory_stats(device_);
  stats.peak_bytes = memory.peak_bytes;
  stats.current_bytes = memory.current_bytes;
  stats.memory_device = device_.str();
  return loss;
}

// Under tensor parallelism the global norm sums every rank's shards over the tensor group and
// counts each replicated parameter once (on tensor rank 0) and each shard repeated over a replica
// group (2.5D's depth layers) once (its copy at index 0), as the serial model's norm does. Under
// ZeRO the engine first sums the shards' partial norms over the data group.
// Under pipeline parallelism the stages' partial sums are added too, a tied parameter counted on
// the first stage only.
double Trainer::clip_gradients() {
  const double max_norm = config_.train.grad_clip;
  if (!tensor_parallel() && !pipeline_) return update_->clip_grad_norm(max_norm, {}, {});
  std::vector<bool> counted = pipeline_ ? pipeline_->counted_parameters() : std::vector<bool>();
  if (tensor_parallel()) {
    const auto placements = task_->model().named_placements();  // model.parameters()' order
    const bool counts_replicated = context_->tensor_group()->rank() == 0;
    counted.resize(placements.size(), true);
    for (size_t i = 0; i < placements.size(); ++i)
      counted[i] = counted[i] && (placements[i].second.replicated()
                                      ? counts_replicated
                                      : placements[i].second.counted_copy());  // 2.5D: depth 0
  }
  parallel::Communicator* tensor_group =
      tensor_parallel() ? context_->tensor_group().get() : nullptr;
  parallel::Communicator* pipeline_group =
      pipeline_ ? context_->pipeline_group().get() : nullptr;
  return update_->clip_grad_norm(max_norm, counted, [&](double local) {
    return sum_over_ranks(pipeline_group, sum_over_ranks(tensor_group, {local}))[0];
  });
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
  if (tensor_parallel()) {
    int64_t local = 0;
    for (const Tensor& p : task_->model().parameters()) local += p.numel();
    std::string groups;
    const parallel::GroupLayout layout = parallel::group_layout(c.parallel);
    for (const auto& g : layout.at("tensor")) {
      groups += groups.empty() ? "" : " ";
      for (size_t i = 0; i < g.size(); ++i) groups += (i ? "," : "[") + std::to_string(g[i]);
      groups += "]";
    }
    char held[32];
    std::snprintf(held, sizeof held, "%.2fM", double(local) / 1e6);
    *os << "  tensor parallel: " << c.parallel.tensor.mode << " over " << c.parallel.tensor.size
        << " ranks, groups " << groups
        << (c.parallel.tensor.sequence_parallel ? ", sequence parallel (activations T / size)" : "")
        << "; each rank holds " << held
        << " parameters (its shards and the replicated norms, biases and positions)\n";
  }
  if (pipeline_) *os << pipeline_->describe() << "\n";
  if (c.parallel.sequence > 1) {
    // ViT's sequence is its patches and the class token, padded up to a multiple of the ranks.
    const int64_t s = c.parallel.sequence;
    const int64_t tokens = c.kind == ModelKind::vit ? (c.vit.num_patches() + s) / s * s : c.seq_len();
    *os << "  sequence parallel: " << c.parallel.sequence_mode << " attention over " << s
        << " ranks, each holding " << tokens / s << " positions of every sequence"
        << (c.parallel.sequence_layout == "zigzag"
                ? str_cat(" (zigzag layout: rank r holds chunks r and ", 2 * s - 1,
                          " - r of ", 2 * s, ", so causal attention costs every rank the same)")
                : std::string(", contiguous"))
        << "\n";
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
  const bool first = step_ == summary_.start_step && !placement_reported_;
  const double loss = train_step(step_, stats);
  ++step_;
  units_seen_ += stats.units;
  progress_->step(stats);
  if (first && rank0()) {
    placement_reported_ = true;
    if (const std::string report = update_->placement_report(); !report.empty())
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
  if (rank0() && !summary_.losses.empty()) {
    std::ostringstream os;
    os << "done: " << step_ - summary_.start_step << " steps in "
       << Progress::format_duration(
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count())
       << " | loss " << summary_.losses.front() << " -> " << summary_.losses.back();
    if (scaler_) os << " | " << summary_.skipped_steps << " steps skipped by the loss scaler";
    progress_->message(os.str());
  }
  // Model parallel or ZeRO stage 3: the sample's forward passes are collective (stage 3 gathers
  // the parameters), so every rank runs them.
  if ((rank0() && options_.out) || tensor_parallel() || pipeline_ || config_.zero.stage == 3 ||
      config_.parallel.sequence > 1) {
    std::ostringstream discarded;
    task_->finish(rank0() && options_.out ? *options_.out : discarded);
  }
  return summary_;
}

}  // namespace

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

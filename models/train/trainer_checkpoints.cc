// The trainer's checkpoints (see trainer_impl.h): saving and resuming in the serial format (every
// tensor gathered into the serial model, written by rank 0) and the sharded one (every rank writes
// the pieces it owns; a resume reads only the pieces its layout needs), the run state both share,
// and initial weights from a Hugging Face directory.
#include <set>

#include "core/error.h"
#include "core/factory.h"
#include "models/train/init_from.h"
#include "models/train/sharded_state.h"
#include "models/train/train_state.h"
#include "models/train/trainer_impl.h"
#include "optim/param_math.h"
#include "optim/state_key.h"

namespace tessera::train::detail {

namespace {

// Both formats' state.json carries the trainer's section (train_state below).
void check_train_state(const json& s, const std::string& dir) {
  TS_CHECK(
      s.value("format", "") == kTrainStateFormat && s.contains("step") && s.contains("optimizer"),
      "checkpoint", dir, ": state.json is not a tessera trainer checkpoint");
}

}  // namespace

void Trainer::init_from_hf(const std::string& dir) {
  if (checkpoint_to_resume(config_.checkpoint)) {  // the checkpoint's weights are later ones
    if (std::ostream* os = out()) *os << "model.init_from " << dir << " ignored: resuming\n";
    return;
  }
  io::NamedTensors serial = hf_init_tensors(config_, dir);
  if (pipeline_) serial = stage_tensors(serial, dir);
  const Placements placements =
      tensor_parallel() ? model_state_placements(task_->model()) : Placements();
  update_->checkpoint().load_model(
      task_->model(), init_tensors_for_rank(serial, task_->model(), config_.kind, placements, dir),
      dir);
  if (std::ostream* os = out()) *os << "weights from Hugging Face " << dir << "\n";
}

void Trainer::resume(const std::string& dir) {
  if (io::is_piece_checkpoint(dir)) return resume_sharded(dir);
  io::CheckpointContents ck = io::load_checkpoint(dir);
  const json& s = ck.state;
  check_train_state(s, dir);
  // The checkpoint holds serial tensors: under tensor parallelism each rank takes its shards.
  const Placements placements =
      tensor_parallel() ? model_state_placements(task_->model()) : Placements();
  optim::OptimizerState opt{s.at("optimizer"), ck.optimizer};
  if (pipeline_) {
    // This stage's tensors of the serial checkpoint, its state renumbered to its parameters.
    ck.model = stage_tensors(ck.model, dir);
    opt = renumber_state(opt, serial_order(), local_order());
  }
  update_->checkpoint().load_model(task_->model(), cut_named(ck.model, placements), dir);
  try {
    io::NamedTensors opt_tensors = opt.tensors;
    if (tensor_parallel()) {
      Placements by_name;
      for (const auto& [name, t] : opt_tensors)
        by_name.emplace(name,
                        update_->checkpoint().state_placement(name, t, placements, task_->model()));
      opt_tensors = cut_named(opt_tensors, by_name);
    }
    update_->checkpoint().load_state_dict({opt.meta, opt_tensors});
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
  check_train_state(s, dir);
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
  if (update_->checkpoint().load_own_pieces(task_->model(), meta, optimizer_states, read))
    return restore_run_state(s, dir);
  io::NamedTensors tensors;
  for (const auto& [name, t] : model.state_dict()) tensors.emplace_back(name, read(name, name, 0, -1));
  update_->checkpoint().load_model(task_->model(), tensors, dir);
  try {
    optim::OptimizerState opt{meta, {}};
    for (size_t k = 0; k < order.names.size(); ++k) {
      const std::string& param = order.names[k];
      for (const std::string& what : optimizer_states[param])
        opt.tensors.emplace_back(optim::state_key(k, what),
                                 read(optimizer_tensor_name(what, param), param, 0, -1));
    }
    update_->checkpoint().load_state_dict(opt);
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
      // A parameter ZeRO-3 released holds the masters' values, which are checked below: reading
      // it would gather the whole model on every save.
      if (p.storage()->released()) continue;
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
  optim::OptimizerState opt = update_->checkpoint().state_dict();
  io::CheckpointContents ck;
  ck.model = update_->checkpoint().model_tensors(task_->model());
  ck.optimizer = opt.tensors;
  if (tensor_parallel()) {
    // Serial names and shapes: every rank takes part in the gathers, rank 0 writes.
    const Placements placements = model_state_placements(task_->model());
    Placements by_name;
    for (const auto& [name, t] : ck.optimizer)
      by_name.emplace(name,
                      update_->checkpoint().state_placement(name, t, placements, task_->model()));
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
            {"tensor_mode", parallel::tensor_mode_name(p.tensor.mode)},
            {"zero_stage", config_.zero.stage},
            {"format", config_.checkpoint.format}}}};
}

// Which of this rank's pieces it writes: a piece several ranks hold identically is written by one
// of them, decided without communication: data and sequence rank 0 for a data-parallel replica,
// the counted copy (param_copies.h) for a tensor replicated over the tensor group, 2.5D's depth
// replicas and a weight tied between the pipeline's ends.
std::vector<io::PieceWrite> Trainer::owned_pieces() {
  const nn::Module& model = task_->model();
  const bool data_first =
      !context_ || (context_->coord("data") == 0 && context_->coord("sequence") == 0);
  const Placements placements = model_state_placements(model);
  std::vector<io::PieceWrite> out;
  for (StatePiece& piece : update_->checkpoint().checkpoint_pieces(model)) {
    if (piece.data_replicated && !data_first) continue;
    auto it = placements.find(piece.param);
    parallel::tensor::Placement p = it != placements.end()
                                        ? it->second
                                        : parallel::tensor::replicated(piece.data.shape());
    // State not shaped like its parameter (none of the bundled optimizers has any): its own.
    if (piece.flat_begin < 0 && piece.data.numel() != shape_numel(p.local_shape()))
      p = parallel::tensor::replicated(piece.data.shape());
    if (!copies_->counted(p, piece.param)) continue;
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
  std::vector<io::PieceWrite> mine;
  try {
    run_agreed(world_.get(), [&] {
      mine = owned_pieces();
      if (rank0()) io::begin_piece_directory(dir);
    });
    run_agreed(world_.get(), [&] {
      io::write_rank_pieces(dir, rank, mine,
                            {{"optimizer", update_->checkpoint().named_meta(task_->model())}});
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

}  // namespace tessera::train::detail

// The plain and the ZeRO update engines (see update_engine.h).
#include "models/train/update_engine.h"

#include <cstdio>
#include <map>
#include <optional>
#include <set>

#include "core/error.h"
#include "core/factory.h"
#include "models/train/pipeline_state.h"
#include "models/train/train_state.h"
#include "optim/make_optimizer.h"
#include "optim/mixed_precision.h"
#include "optim/state_key.h"
#include "parallel/data/data_parallel.h"
#include "parallel/zero/sharded_optimizer.h"

namespace tessera::train {

namespace {

// The optimizer's numbering of the model's parameters (both engines number them this way).
ParamOrder order_of(const nn::Module& model) {
  std::vector<std::pair<std::string, Shape>> params;
  for (const auto& [name, p] : model.named_parameters()) params.emplace_back(name, p.shape());
  return ParamOrder::of(params);
}

// DataParallel's all-reduce (with more than one data rank), f32 masters of every parameter, and
// one optimizer over them.
class PlainUpdate : public UpdateEngine {
 public:
  explicit PlainUpdate(const UpdateEngineSpec& spec)
      : masters_(spec.model->parameters()),
        optimizer_(optim::make_optimizer(spec.optimizer, masters_.master_groups(spec.groups))) {
    if (spec.grad_group && spec.grad_group->size() > 1)
      dp_ = std::make_unique<parallel::DataParallel>(
          spec.model->named_parameters(), spec.grad_group,
          parallel::DataParallelOptions{.completed_after_backward = spec.completed_after_backward,
                                        .sync_groups = spec.sync_groups});
  }

  void set_grad_sync(bool sync) override {
    if (!dp_) return;
    if (sync) {
      no_sync_.reset();
    } else if (!no_sync_) {
      no_sync_.emplace(dp_->no_sync());
    }
  }
  void sync_group(size_t g) override {
    if (dp_) dp_->sync_group(g);
  }
  void finish_gradients() override {
    if (dp_) dp_->finish_gradient_sync();
    masters_.grads_to_master();
  }
  const std::vector<Tensor>& step_params() const override { return masters_.masters(); }
  optim::Optimizer& optimizer() override { return *optimizer_; }
  double clip_grad_norm(double max_norm, const std::vector<bool>& counted,
                        const optim::SumReducer& reduce) override {
    const std::vector<Tensor>& params = masters_.masters();
    if (counted.empty()) return optim::clip_grad_norm(params, max_norm, reduce);
    std::vector<Tensor> mine;
    for (size_t i = 0; i < params.size(); ++i)
      if (counted[i]) mine.push_back(params[i]);
    return optim::clip_grad_norm(params, mine, max_norm, reduce);
  }
  void finish_step() override {
    masters_.master_to_model();
    masters_.zero_grad();
  }

  io::NamedTensors model_tensors(const nn::Module& model) override {
    return model_checkpoint_tensors(model, masters_);
  }
  void load_model(nn::Module& model, const io::NamedTensors& tensors,
                  const std::string& dir) override {
    load_model_tensors(model, &masters_, tensors, dir);
  }
  optim::OptimizerState state_dict() override { return optimizer_->state_dict(); }
  void load_state_dict(const optim::OptimizerState& state) override {
    optimizer_->load_state_dict(state);
  }
  parallel::tensor::Placement state_placement(const std::string& name, const Tensor& t,
                                              const Placements& model_placements,
                                              const nn::Module& model) const override {
    return optimizer_state_placement(name, t, *optimizer_, masters_, model_placements, model);
  }
  std::vector<StatePiece> checkpoint_pieces(const nn::Module& model) override {
    std::vector<StatePiece> out;
    for (const auto& [name, t] : model_checkpoint_tensors(model, masters_))
      out.push_back({.name = name, .param = name, .data = t});
    const ParamOrder order = order_of(model);
    for (const auto& [key, t] : optimizer_->state_dict().tensors) {
      const std::optional<optim::StateKey> state = optim::parse_state_key(key);
      TS_CHECK(state.has_value(), "checkpoint",
               "expected optimizer tensors named state.<k>.<name>, got '", key, "'");
      const std::string& param = order.names.at(state->param);
      out.push_back({.name = optimizer_tensor_name(state->name, param), .param = param, .data = t});
    }
    return out;
  }
  nlohmann::json named_meta(const nn::Module& model) override {
    return named_optimizer_meta(optimizer_->state_dict().meta, order_of(model));
  }
  std::string describe() const override { return ""; }

 private:
  optim::MasterWeights masters_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<parallel::DataParallel> dp_;
  std::optional<parallel::DataParallel::NoSyncGuard> no_sync_;
};

// ZeRO stages 1-3: parallel::zero::ShardedOptimizer over the data group.
class ZeroUpdate : public UpdateEngine {
 public:
  explicit ZeroUpdate(const UpdateEngineSpec& spec)
      : zero_(spec.model->named_parameters(), spec.groups, spec.optimizer, spec.grad_group,
              parallel::zero::ZeroOptions{
                  .stage = spec.zero_stage,
                  .bucket_cap_bytes = spec.zero_bucket_bytes,
                  .stage3 = spec.zero3,
                  .offload = spec.zero_offload,
                  .overlap_step = spec.zero_overlap_step,
                  .sharded_masters = spec.zero3_masters}),
        built_sharded_(!spec.zero3_masters.empty()) {}

  void set_grad_sync(bool sync) override {
    if (sync) {
      no_sync_.reset();
    } else if (!no_sync_) {
      no_sync_.emplace(zero_.no_sync());
    }
  }
  void sync_group(size_t) override {}
  void finish_gradients() override { zero_.finish_gradient_sync(); }
  const std::vector<Tensor>& step_params() const override { return zero_.shard_params(); }
  optim::Optimizer& optimizer() override { return zero_.optimizer(); }
  void step() override { zero_.step(); }
  double clip_grad_norm(double max_norm, const std::vector<bool>& counted,
                        const optim::SumReducer& reduce) override {
    return zero_.clip_grad_norm(max_norm, reduce, counted);
  }
  void finish_step() override {
    zero_.gather_parameters();
    zero_.zero_grad();
  }

  // f32 parameters hold their masters' values after every gather; 16-bit ones get theirs gathered.
  // Under stage 3 every parameter's master is gathered: the parameters hold no data, and only rank
  // 0 writes the checkpoint (a released parameter read there would gather on one rank alone).
  io::NamedTensors model_tensors(const nn::Module& model) override {
    if (zero_.stage() == 3) return stage3_model_tensors(model);
    optim::MasterWeights full(model.parameters());
    std::vector<Tensor> wanted;
    for (size_t i = 0; i < full.masters().size(); ++i)
      wanted.push_back(full.masters()[i].is_same(full.model_params()[i]) ? Tensor()
                                                                         : full.masters()[i]);
    zero_.gather_masters(wanted);
    return model_checkpoint_tensors(model, full);
  }
  // Under stage 3 loading writes into gathered parameters, which keep the writes when released
  // (stage3_params.h), and load_masters reads them back on every rank in the same order.
  void load_model(nn::Module& model, const io::NamedTensors& tensors,
                  const std::string& dir) override {
    const auto window = zero_.gather_window();  // every rank loads every parameter
    optim::MasterWeights full(model.parameters());
    load_model_tensors(model, &full, tensors, dir);
    zero_.load_masters(full.masters());
  }
  optim::OptimizerState state_dict() override { return zero_.state_dict(); }
  void load_state_dict(const optim::OptimizerState& state) override {
    zero_.load_state_dict(state);
  }
  parallel::tensor::Placement state_placement(const std::string& name, const Tensor& t,
                                              const Placements& model_placements,
                                              const nn::Module& model) const override {
    const std::optional<optim::StateKey> state = optim::parse_state_key(name);
    if (!state) return parallel::tensor::replicated(t.shape());
    const size_t param = zero_.param_of_state_index(state->param);
    const parallel::tensor::Placement& p = model_placements.at(zero_.params()[param].first);
    if (t.shape() == p.local_shape() || t.shape() == p.global_shape) return p;
    return parallel::tensor::replicated(t.shape());
  }
  // Each rank writes its own shards' flat ranges (unique over the data group) and, like a plain
  // replica, the buffers.
  // A state_dict name that aliases a parameter (a tied lm_head.weight) gets the master's pieces
  // too: under stage 3 reading the alias itself would gather on the writing rank alone.
  std::vector<StatePiece> checkpoint_pieces(const nn::Module& model) override {
    const std::vector<parallel::zero::ShardedOptimizer::ShardSlice> slices = zero_.shard_slices();
    std::map<const Storage*, size_t> param_of;
    for (size_t i = 0; i < zero_.params().size(); ++i)
      param_of[zero_.params()[i].second.storage().get()] = i;
    std::vector<StatePiece> out;
    for (const auto& [name, t] : model.state_dict()) {
      auto it = param_of.find(t.storage().get());
      if (it == param_of.end()) {
        out.push_back({.name = name, .param = name, .data = t});
        continue;
      }
      for (const auto& slice : slices) {
        if (slice.param != it->second) continue;
        out.push_back({.name = name, .param = name, .data = slice.master,
                       .flat_begin = slice.offset, .data_replicated = false});
        if (name != zero_.params()[slice.param].first) continue;  // state once, by its own name
        for (const auto& [what, st] : slice.state)
          out.push_back({.name = optimizer_tensor_name(what, name), .param = name, .data = st,
                         .flat_begin = slice.offset, .data_replicated = false});
      }
    }
    return out;
  }
  nlohmann::json named_meta(const nn::Module& model) override {
    return named_optimizer_meta(zero_.state_meta(), order_of(model));
  }
  // Buffers whole (every replica holds them); masters and optimizer state by this rank's ranges.
  bool load_own_pieces(nn::Module& model, const nlohmann::json& meta,
                       const std::map<std::string, std::vector<std::string>>& states,
                       const PieceSource& read) override {
    const auto window = zero_.gather_window();  // every rank loads every parameter
    std::set<const Storage*> params;
    for (const auto& [name, p] : zero_.params()) params.insert(p.storage().get());
    for (const auto& [name, t] : model.state_dict())
      if (!params.count(t.storage().get()))
        t.copy_(read(name, name, 0, -1).to(t.dtype()).reshape(t.shape()));
    std::set<std::string> names;  // a stepped group's state tensors (every parameter has them)
    for (const auto& [param, whats] : states) names.insert(whats.begin(), whats.end());
    zero_.load_shards(meta, {names.begin(), names.end()},
                      [&](size_t p, int64_t offset, int64_t numel, const std::string& what) {
                        const std::string& param = zero_.params()[p].first;
                        return read(what.empty() ? param : optimizer_tensor_name(what, param),
                                    param, offset, numel);
                      });
    return true;
  }
  parallel::zero::Stage3Params::GatherWindow gather_window() override {
    return zero_.gather_window();
  }
  std::string describe() const override {
    int64_t total = 0, mine = 0;
    for (const auto& g : zero_.plan().groups) {
      total += g.numel;
      mine += g.shard_numel;
    }
    const int n = zero_.comm()->size();
    const char* more = "";
    if (zero_.stage() == 2) more = " and reduces only its shard's gradients";
    if (zero_.stage() == 3)
      more =
          ", reduces only its shard's gradients and holds only its shard of the parameters, "
          "gathering each on use";
    char line[480];
    std::snprintf(line, sizeof line,
                  "  zero: stage %d over %d data rank%s: each keeps 1/%d of the f32 masters and "
                  "optimizer state (%lld of %lld elements)%s%s",
                  zero_.stage(), n, n == 1 ? "" : "s", n, static_cast<long long>(mine),
                  static_cast<long long>(total), more,
                  !zero_.offloaded()      ? ""
                  : zero_.overlaps_step() ? "; masters and optimizer state offloaded to host "
                                            "memory, stepped there by the CPU Adam range by range "
                                            "during backward"
                                          : "; masters and optimizer state offloaded to host "
                                            "memory, stepped there by the CPU Adam");
    std::string out = line;
    if (built_sharded_)
      out += "\n  zero: built sharded (zero.sharded_init): each parameter left this rank's pieces "
             "in its shards as it was drawn, so no rank held the whole model";
    if (const parallel::zero::Stage3Params* s3 = zero_.stage3(); s3 && s3->chunked()) {
      // Where the parameter shards wait between uses (param_placement.h).
      const parallel::zero::Stage3Placement p = s3->placement();
      const parallel::zero::ParamPlacement& how = s3->options().placement;
      out += "\n  zero: parameter shards in " + std::to_string(p.chunks) + " chunks, " +
             (how.policy == parallel::zero::PlacementPolicy::auto_traced
                  ? "placed after a warm-up step (all on the host) to keep the device under " +
                        std::to_string(how.device_limit) + " bytes"
                  : std::to_string(p.chunks - p.device_chunks) + " of them on the host (static)");
    }
    return out;
  }

  std::string placement_report() const override {
    const parallel::zero::Stage3Params* s3 = zero_.stage3();
    if (!s3 || !s3->chunked() ||
        s3->options().placement.policy != parallel::zero::PlacementPolicy::auto_traced)
      return "";
    const parallel::zero::Stage3Placement p = s3->placement();
    char line[480];
    std::snprintf(line, sizeof line,
                  "zero: the warm-up step peaked at %.2f MiB of device memory with every parameter "
                  "chunk on the host; %lld of %lld chunks (%.2f MiB) now on the device, %.2f MiB "
                  "on the host (rank 0); every chunk stays on the host, and within each step "
                  "device copies follow the warm-up's trace, the chunk read latest evicted first",
                  double(p.warmup_peak_bytes) / (1 << 20), static_cast<long long>(p.device_chunks),
                  static_cast<long long>(p.chunks), double(p.device_bytes) / (1 << 20),
                  double(p.host_bytes) / (1 << 20));
    return line;
  }

  nlohmann::json step_metrics() override {
    const parallel::zero::Stage3Params* s3 = zero_.stage3();
    if (!s3 || s3->options().placement.policy != parallel::zero::PlacementPolicy::auto_traced ||
        !s3->placement().placed)
      return nlohmann::json::object();
    const parallel::zero::Stage3Stats& now = s3->stats();
    nlohmann::json out = {{"zero_copies_made", now.chunk_fetches - last_.chunk_fetches},
                          {"zero_copies_dropped", now.chunk_evictions - last_.chunk_evictions},
                          {"zero_copied_bytes", now.fetched_bytes - last_.fetched_bytes},
                          {"zero_copy_peak_bytes", now.peak_copy_bytes},
                          {"zero_copy_bytes_between_steps", s3->placement().device_bytes}};
    last_ = now;
    return out;
  }

 private:
  // The state_dict with every parameter replaced by its f32 master, gathered from the shards (in
  // the same order on every rank); other entries (buffers) as they are.
  io::NamedTensors stage3_model_tensors(const nn::Module& model) {
    const auto& params = zero_.params();
    std::vector<Tensor> masters;
    std::map<const Storage*, size_t> index;
    for (size_t i = 0; i < params.size(); ++i) {
      masters.push_back(zeros(params[i].second.shape()));
      index[params[i].second.storage().get()] = i;
    }
    zero_.gather_masters(masters);
    io::NamedTensors out;
    for (const auto& [name, t] : model.state_dict()) {
      auto it = index.find(t.storage().get());
      out.emplace_back(name, it != index.end() ? masters[it->second] : t);
    }
    return out;
  }

  parallel::zero::ShardedOptimizer zero_;
  bool built_sharded_ = false;  // its masters came from a sharded build (zero_build.h)
  parallel::zero::Stage3Stats last_;  // stage 3's counters at the last step_metrics()
  std::optional<parallel::zero::ShardedOptimizer::NoSyncGuard> no_sync_;
};

}  // namespace

std::unique_ptr<UpdateEngine> make_update_engine(const UpdateEngineSpec& spec) {
  TS_CHECK(spec.model != nullptr, "train", "expected a model for the update engine");
  if (spec.zero_stage == 0) return std::make_unique<PlainUpdate>(spec);
  TS_CHECK(spec.grad_group != nullptr, "config", "zero.stage ", spec.zero_stage,
           ": the ZeRO optimizer shards over the data-parallel ranks of an MPI job; run under "
           "mpirun (mpirun -np N tessera train ...) or set zero.stage to 0");
  return std::make_unique<ZeroUpdate>(spec);
}

}  // namespace tessera::train

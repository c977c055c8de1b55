// ZeRO's optimizer checkpoint: masters and optimizer state sharded over the data group, gathered
// for a consolidated checkpoint or written and read as this rank's flat ranges for a sharded one
// (optimizer_checkpoint.h).
#include <map>
#include <optional>
#include <set>

#include "core/factory.h"
#include "models/train/optimizer_checkpoint.h"
#include "models/train/train_state.h"
#include "optim/state_key.h"

namespace tessera::train {

namespace {

class ZeroCheckpoint : public OptimizerCheckpoint {
 public:
  explicit ZeroCheckpoint(parallel::zero::ShardedOptimizer& zero) : zero_(zero) {}

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
        out.push_back({.name = name,
                       .param = name,
                       .data = slice.master,
                       .flat_begin = slice.offset,
                       .data_replicated = false});
        if (name != zero_.params()[slice.param].first) continue;  // state once, by its own name
        for (const auto& [what, st] : slice.state)
          out.push_back({.name = optimizer_tensor_name(what, name),
                         .param = name,
                         .data = st,
                         .flat_begin = slice.offset,
                         .data_replicated = false});
      }
    }
    return out;
  }
  nlohmann::json named_meta(const nn::Module& model) override {
    return named_optimizer_meta(zero_.state_meta(), optimizer_order(model));
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

  parallel::zero::ShardedOptimizer& zero_;
};

}  // namespace

std::unique_ptr<OptimizerCheckpoint> make_zero_checkpoint(parallel::zero::ShardedOptimizer& zero) {
  return std::make_unique<ZeroCheckpoint>(zero);
}

}  // namespace tessera::train

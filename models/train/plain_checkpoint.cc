// The plain path's optimizer checkpoint: every parameter's f32 master and one optimizer over them
// (optimizer_checkpoint.h).
#include <optional>

#include "core/error.h"
#include "models/train/optimizer_checkpoint.h"
#include "models/train/train_state.h"
#include "optim/state_key.h"

namespace tessera::train {

ParamOrder optimizer_order(const nn::Module& model) {
  std::vector<std::pair<std::string, Shape>> params;
  for (const auto& [name, p] : model.named_parameters()) params.emplace_back(name, p.shape());
  return ParamOrder::of(params);
}

namespace {

class PlainCheckpoint : public OptimizerCheckpoint {
 public:
  PlainCheckpoint(optim::MasterWeights& masters, optim::Optimizer& optimizer)
      : masters_(masters), optimizer_(optimizer) {}

  io::NamedTensors model_tensors(const nn::Module& model) override {
    return model_checkpoint_tensors(model, masters_);
  }
  void load_model(nn::Module& model, const io::NamedTensors& tensors,
                  const std::string& dir) override {
    load_model_tensors(model, &masters_, tensors, dir);
  }
  optim::OptimizerState state_dict() override { return optimizer_.state_dict(); }
  void load_state_dict(const optim::OptimizerState& state) override {
    optimizer_.load_state_dict(state);
  }
  parallel::tensor::Placement state_placement(const std::string& name, const Tensor& t,
                                              const Placements& model_placements,
                                              const nn::Module& model) const override {
    return optimizer_state_placement(name, t, optimizer_, masters_, model_placements, model);
  }
  std::vector<StatePiece> checkpoint_pieces(const nn::Module& model) override {
    std::vector<StatePiece> out;
    for (const auto& [name, t] : model_checkpoint_tensors(model, masters_))
      out.push_back({.name = name, .param = name, .data = t});
    const ParamOrder order = optimizer_order(model);
    for (const auto& [key, t] : optimizer_.state_dict().tensors) {
      const std::optional<optim::StateKey> state = optim::parse_state_key(key);
      TS_CHECK(state.has_value(), "checkpoint",
               "expected optimizer tensors named state.<k>.<name>, got '", key, "'");
      const std::string& param = order.names.at(state->param);
      out.push_back({.name = optimizer_tensor_name(state->name, param), .param = param, .data = t});
    }
    return out;
  }
  nlohmann::json named_meta(const nn::Module& model) override {
    return named_optimizer_meta(optimizer_.state_dict().meta, optimizer_order(model));
  }

 private:
  optim::MasterWeights& masters_;
  optim::Optimizer& optimizer_;
};

}  // namespace

std::unique_ptr<OptimizerCheckpoint> make_plain_checkpoint(optim::MasterWeights& masters,
                                                           optim::Optimizer& optimizer) {
  return std::make_unique<PlainCheckpoint>(masters, optimizer);
}

}  // namespace tessera::train

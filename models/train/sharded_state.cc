// Serial-named checkpoints of tensor-parallel models (see sharded_state.h).
#include "models/train/sharded_state.h"

#include "core/error.h"
#include "parallel/tensor/placement_ops.h"

namespace tessera::train {

using parallel::tensor::Placement;

Placements model_state_placements(const nn::Module& model) {
  Placements out;
  for (auto& [name, p] : model.state_placements()) out.emplace(name, p);
  return out;
}

Placement optimizer_state_placement(const std::string& name, const Tensor& t,
                                    const optim::Optimizer& optimizer,
                                    const optim::MasterWeights& masters,
                                    const Placements& model_placements, const nn::Module& model) {
  // "state.<k>.<what>"
  const size_t dot = name.find('.', 6);
  if (name.rfind("state.", 0) != 0 || dot == std::string::npos) return parallel::tensor::replicated(t.shape());
  const size_t k = size_t(std::stoull(name.substr(6, dot - 6)));
  const std::vector<Tensor> params = optimizer.params();
  TS_CHECK(k < params.size(), "checkpoint", "optimizer state '", name, "' names parameter ", k,
           " of ", params.size());
  // The model parameter behind master k, and its name.
  const Storage* master = params[k].storage().get();
  const Tensor* model_param = nullptr;
  for (size_t i = 0; i < masters.masters().size(); ++i)
    if (masters.masters()[i].storage().get() == master) model_param = &masters.model_params()[i];
  TS_ASSERT(model_param != nullptr);
  for (const auto& [pname, p] : model.named_parameters()) {
    if (p.storage().get() != model_param->storage().get()) continue;
    const Placement& placement = model_placements.at(pname);
    if (t.shape() == placement.local_shape() || t.shape() == placement.global_shape)
      return placement;
    break;
  }
  return parallel::tensor::replicated(t.shape());
}

io::NamedTensors gather_named(const io::NamedTensors& shards, const Placements& placements,
                              const parallel::ParallelContext& context) {
  io::NamedTensors out;
  for (const auto& [name, t] : shards) {
    auto it = placements.find(name);
    out.emplace_back(name, it == placements.end()
                               ? t
                               : parallel::tensor::gather_full(t, it->second, context));
  }
  return out;
}

io::NamedTensors cut_named(const io::NamedTensors& full, const Placements& placements) {
  io::NamedTensors out;
  for (const auto& [name, t] : full) {
    auto it = placements.find(name);
    out.emplace_back(name, it == placements.end() ? t : parallel::tensor::cut_shard(t, it->second));
  }
  return out;
}

}  // namespace tessera::train

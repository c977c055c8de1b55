// Serial-named checkpoints of tensor-parallel models (see sharded_state.h).
#include "models/train/sharded_state.h"

#include <set>

#include "core/error.h"
#include "optim/state_key.h"
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
  const std::optional<optim::StateKey> key = optim::parse_state_key(name);
  if (!key) return parallel::tensor::replicated(t.shape());
  const size_t k = key->param;
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

std::string optimizer_tensor_name(const std::string& state, const std::string& param) {
  return "optim/" + state + "/" + param;
}

bool parse_optimizer_tensor_name(const std::string& name, std::string& state, std::string& param) {
  if (name.rfind("optim/", 0) != 0) return false;
  const size_t slash = name.find('/', 6);
  if (slash == std::string::npos || slash == 6 || slash + 1 == name.size()) return false;
  state = name.substr(6, slash - 6);
  param = name.substr(slash + 1);
  return true;
}

io::PieceBox local_box(const Placement& p, int64_t flat_begin, int64_t numel) {
  io::PieceBox box{.global = p.global_shape,
                   .view = p.view,
                   .offsets = p.view_offsets(),
                   .shape = p.local_view()};
  if (flat_begin >= 0) box.begin = flat_begin, box.end = flat_begin + numel;
  return box;
}

nlohmann::json named_optimizer_meta(const nlohmann::json& meta, const ParamOrder& order) {
  using nlohmann::json;
  auto name_of = [&](size_t k) {
    TS_CHECK(k < order.names.size(), "checkpoint", "optimizer state names parameter ", k, " of ",
             order.names.size());
    return order.names[k];
  };
  json groups = json::array();
  for (json g : meta.at("param_groups")) {
    json names = json::array();
    for (const json& k : g.at("params")) names.push_back(name_of(k.get<size_t>()));
    g["params"] = names;
    groups.push_back(g);
  }
  json state = json::object();
  for (const auto& [k, entry] : meta.at("state").items()) state[name_of(std::stoull(k))] = entry;
  return {{"type", meta.at("type")}, {"param_groups", groups}, {"state", state}};
}

nlohmann::json indexed_optimizer_meta(const nlohmann::json& named, const ParamOrder& order) {
  using nlohmann::json;
  TS_CHECK(named.is_object() && named.contains("type") && named.contains("param_groups") &&
               named.contains("state"),
           "checkpoint", "expected optimizer meta with type, param_groups and state, got ",
           named.dump().substr(0, 200));
  json groups = json::array();
  std::vector<bool> placed(order.names.size(), false);
  for (json g : named.at("param_groups")) {
    std::set<std::string> members;
    for (const json& n : g.at("params")) members.insert(n.get<std::string>());
    json ks = json::array();
    for (size_t k = 0; k < order.names.size(); ++k)
      if (members.count(order.names[k])) ks.push_back(k), placed[k] = true;
    g["params"] = ks;
    groups.push_back(g);
  }
  for (size_t k = 0; k < order.names.size(); ++k)
    TS_CHECK(placed[k], "checkpoint", "parameter '", order.names[k],
             "' is in no optimizer parameter group of the checkpoint (another model's?)");
  json state = json::object();
  for (size_t k = 0; k < order.names.size(); ++k)
    if (named["state"].contains(order.names[k]))
      state[std::to_string(k)] = named["state"][order.names[k]];
  return {{"type", named.at("type")}, {"param_groups", groups}, {"state", state}};
}

nlohmann::json merge_named_meta(const std::vector<nlohmann::json>& metas) {
  using nlohmann::json;
  TS_CHECK(!metas.empty(), "checkpoint", "expected optimizer meta from at least one rank");
  json out = metas.front();
  std::vector<std::set<std::string>> names(out.at("param_groups").size());
  for (const json& m : metas) {
    TS_CHECK(m.at("type") == out.at("type") && m.at("param_groups").size() == names.size(),
             "checkpoint", "ranks disagree on the optimizer: ", m.at("type").dump(), " vs ",
             out.at("type").dump());
    for (size_t g = 0; g < names.size(); ++g)
      for (const json& n : m["param_groups"][g]["params"]) names[g].insert(n.get<std::string>());
    for (const auto& [name, entry] : m.at("state").items()) out["state"][name] = entry;
  }
  for (size_t g = 0; g < names.size(); ++g)
    out["param_groups"][g]["params"] = std::vector<std::string>(names[g].begin(), names[g].end());
  return out;
}

}  // namespace tessera::train

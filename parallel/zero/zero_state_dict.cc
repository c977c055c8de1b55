// ShardedOptimizer's checkpoint state in the plain optimizer's format: optimizer state and f32
// masters gathered from the shards into per-parameter tensors, and cut back into shards on load.
#include <map>
#include <set>

#include "core/error.h"
#include "core/factory.h"
#include "optim/state_key.h"
#include "parallel/zero/sharded_optimizer.h"

namespace tessera::parallel::zero {

using nlohmann::json;

namespace {

using optim::parse_state_key;
using optim::state_key;

}  // namespace

optim::OptimizerState ShardedOptimizer::state_dict() const {
  // The inner optimizer has one parameter per group: its index is the group's.
  const optim::OptimizerState inner = optimizer().state_dict();
  optim::OptimizerState out;
  out.meta["type"] = inner.meta.at("type");
  json groups = json::array();
  json state = json::object();
  for (size_t g = 0; g < layout_->plan.groups.size(); ++g) {
    const ZeroGroupPlan& gp = layout_->plan.groups[g];
    json options = inner.meta.at("param_groups").at(g);
    json indices = json::array();
    for (size_t i = 0; i < gp.slots.size(); ++i) indices.push_back(layout_->group_begin[g] + i);
    options["params"] = indices;
    groups.push_back(options);
    const int64_t step = optimizer().step_count(g);
    if (step == 0) continue;
    for (size_t i = 0; i < gp.slots.size(); ++i)
      state[std::to_string(layout_->group_begin[g] + i)] = {{"step", step}};
    // Each state tensor of the group's shard, gathered into the flat buffer and cut by parameter
    // (in the plain optimizer's order: by parameter, then by name).
    std::vector<std::pair<std::string, Tensor>> gathered;
    for (const auto& [name, shard] : inner.tensors) {
      const std::optional<optim::StateKey> key = parse_state_key(name);
      if (!key || key->param != g) continue;
      // Beside the shard (on the host under offload): the group moves it over that backend.
      Tensor all = empty({gp.padded_numel()}, {.dtype = DType::f32, .device = shard.device()});
      layout_->comm->all_gather(shard, all)->wait();
      gathered.emplace_back(key->name, all);
    }
    for (size_t i = 0; i < gp.slots.size(); ++i) {
      const FlatSlot& s = gp.slots[i];
      for (const auto& [what, all] : gathered)
        out.tensors.emplace_back(
            state_key(layout_->group_begin[g] + i, what),
            all.narrow(0, s.offset, s.numel).view(layout_->params[s.param].shape()));
    }
  }
  out.meta["param_groups"] = groups;
  out.meta["state"] = state;
  return out;
}

nlohmann::json ShardedOptimizer::state_meta() const {
  const json inner = optimizer().state_dict().meta;
  json groups = json::array(), state = json::object();
  for (size_t g = 0; g < layout_->plan.groups.size(); ++g) {
    json options = inner.at("param_groups").at(g);
    json indices = json::array();
    for (size_t i = 0; i < layout_->plan.groups[g].slots.size(); ++i)
      indices.push_back(layout_->group_begin[g] + i);
    options["params"] = indices;
    groups.push_back(options);
    if (const int64_t step = optimizer().step_count(g); step > 0)
      for (size_t i = 0; i < layout_->plan.groups[g].slots.size(); ++i)
        state[std::to_string(layout_->group_begin[g] + i)] = {{"step", step}};
  }
  return {{"type", inner.at("type")}, {"param_groups", groups}, {"state", state}};
}

std::vector<ShardedOptimizer::ShardSlice> ShardedOptimizer::shard_slices() const {
  const optim::OptimizerState inner = optimizer().state_dict();
  std::vector<ShardSlice> out;
  for (size_t g = 0; g < layout_->plan.groups.size(); ++g) {
    for (const ShardPiece& pc : layout_->pieces[g]) {
      if (pc.numel == 0) continue;
      ShardSlice s{.param = pc.param,
                   .offset = pc.param_offset,
                   .master = shard_params()[g].detach().narrow(0, pc.shard_offset, pc.numel)};
      for (const auto& [name, shard] : inner.tensors)
        if (const std::optional<optim::StateKey> key = parse_state_key(name);
            key && key->param == g)
          s.state.emplace_back(key->name, shard.narrow(0, pc.shard_offset, pc.numel));
      out.push_back(std::move(s));
    }
  }
  return out;
}

json ShardedOptimizer::inner_meta(const json& m, std::vector<int64_t>& steps) const {
  const char* op = "load_state_dict";
  TS_CHECK(m.is_object() && m.contains("type") && m.contains("param_groups") && m.contains("state"),
           op, "expected meta with 'type', 'param_groups' and 'state', got ", m.dump());
  const json& groups = m.at("param_groups");
  const json& state = m.at("state");
  TS_CHECK(groups.is_array() && groups.size() == layout_->plan.groups.size(), op, "expected ",
           layout_->plan.groups.size(), " param_groups, got ",
           groups.is_array() ? std::to_string(groups.size()) : groups.dump());
  TS_CHECK(state.is_object(), op, "expected 'state' as an object, got ", state.dump());
  std::set<std::string> used_state;
  json inner_groups = json::array();
  json inner_state = json::object();
  steps.assign(layout_->plan.groups.size(), 0);
  for (size_t g = 0; g < layout_->plan.groups.size(); ++g) {
    const ZeroGroupPlan& gp = layout_->plan.groups[g];
    json j = groups[g];
    json expected = json::array();
    for (size_t i = 0; i < gp.slots.size(); ++i) expected.push_back(layout_->group_begin[g] + i);
    TS_CHECK(j.is_object() && j.contains("params") && j["params"] == expected, op,
             "expected param_groups[", g, "] with params ", expected.dump(), " (", gp.slots.size(),
             " parameters), got ", j.dump());
    j["params"] = json::array({g});
    inner_groups.push_back(j);

    // One step count per group: the shard steps as one parameter.
    int64_t step = -1;
    for (size_t i = 0; i < gp.slots.size(); ++i) {
      const std::string key = std::to_string(layout_->group_begin[g] + i);
      int64_t s = 0;
      if (state.contains(key)) {
        const json& e = state.at(key);
        TS_CHECK(e.is_object() && e.contains("step") && e["step"].is_number_integer(), op,
                 "expected state.", key, " as {\"step\": n}, got ", e.dump());
        s = e["step"].get<int64_t>();
        used_state.insert(key);
      }
      TS_CHECK(step < 0 || s == step, op, "expected one step count for the parameters of group ", g,
               " (the ZeRO optimizer steps a group's shard as one), got ", step, " and ", s,
               " (state.", key, ")");
      step = s;
    }
    if (step <= 0) continue;
    steps[g] = step;
    inner_state[std::to_string(g)] = {{"step", step}};
  }
  for (const auto& item : state.items())
    TS_CHECK(used_state.count(item.key()) == 1, op, "expected state entries for parameters 0..",
             int64_t(layout_->params.size()) - 1, ", got entry '", item.key(), "'");
  return {{"type", m.at("type")}, {"param_groups", inner_groups}, {"state", inner_state}};
}

void ShardedOptimizer::load_state_dict(const optim::OptimizerState& sd) {
  const char* op = "load_state_dict";
  std::vector<int64_t> steps;
  optim::OptimizerState inner;
  inner.meta = inner_meta(sd.meta, steps);
  std::map<std::string, const Tensor*> by_name;
  for (const auto& [name, t] : sd.tensors) by_name[name] = &t;
  std::set<std::string> used_tensors;
  for (size_t g = 0; g < layout_->plan.groups.size(); ++g) {
    const ZeroGroupPlan& gp = layout_->plan.groups[g];
    if (steps[g] <= 0) continue;
    // Every state tensor the first parameter has, cut into this rank's shard of the group.
    std::vector<std::string> names;
    for (const auto& [name, t] : sd.tensors)
      if (const std::optional<optim::StateKey> key = parse_state_key(name);
          key && key->param == layout_->group_begin[g])
        names.push_back(key->name);
    for (const std::string& what : names) {
      Tensor shard =
          zeros({gp.shard_numel}, {.dtype = DType::f32, .device = layout_->shard_device});
      for (size_t i = 0; i < gp.slots.size(); ++i) {
        const std::string full = state_key(layout_->group_begin[g] + i, what);
        auto it = by_name.find(full);
        const Tensor& p = layout_->params[gp.slots[i].param];
        TS_CHECK(it != by_name.end() && it->second->defined(), op, "expected tensor '", full,
                 "', got none");
        TS_CHECK(it->second->shape() == p.shape() && it->second->dtype() == DType::f32, op,
                 "expected '", full, "' of shape ", shape_str(p.shape()), " f32, got ",
                 it->second->describe());
        used_tensors.insert(full);
      }
      for (const ShardPiece& pc : layout_->pieces[g]) {
        const Tensor& src = *by_name.at(state_key(state_index(pc.param), what));
        shard.narrow(0, pc.shard_offset, pc.numel)
            .copy_(src.reshape({src.numel()}).narrow(0, pc.param_offset, pc.numel));
      }
      inner.tensors.emplace_back(state_key(g, what), shard);
    }
  }
  for (const auto& [name, t] : sd.tensors)
    TS_CHECK(used_tensors.count(name) == 1, op, "expected only the state tensors of ",
             optimizer().type(), ", got unexpected tensor '", name, "'");
  // The inner optimizer checks the type, the options and the state names against them.
  optimizer().load_state_dict(inner);
}

void ShardedOptimizer::load_shards(const json& meta, const std::vector<std::string>& state_names,
                                   const SliceReader& read) {
  std::vector<int64_t> steps;
  optim::OptimizerState inner;
  inner.meta = inner_meta(meta, steps);
  for (size_t g = 0; g < layout_->plan.groups.size(); ++g) {
    const ZeroGroupPlan& gp = layout_->plan.groups[g];
    auto fill = [&](const Tensor& shard, const std::string& what) {
      for (const ShardPiece& pc : layout_->pieces[g]) {
        if (pc.numel == 0) continue;
        const Tensor v = read(pc.param, pc.param_offset, pc.numel, what);
        TS_CHECK(v.defined() && v.numel() == pc.numel, "zero", "expected ", pc.numel,
                 " elements of '", params_[pc.param].first, "' (", what.empty() ? "master" : what,
                 "), got ", v.defined() ? v.describe() : "none");
        shard.narrow(0, pc.shard_offset, pc.numel).copy_(v.reshape({pc.numel}).to(DType::f32));
      }
    };
    fill(shard_params()[g].detach(), "");
    if (steps[g] <= 0) continue;
    for (const std::string& what : state_names) {
      Tensor shard =
          zeros({gp.shard_numel}, {.dtype = DType::f32, .device = layout_->shard_device});
      fill(shard, what);
      inner.tensors.emplace_back(state_key(g, what), shard);
    }
  }
  optimizer().load_state_dict(inner);
  gather_parameters();  // the model's parameters (stage 3: its compute shards) follow
}

void ShardedOptimizer::gather_masters(const std::vector<Tensor>& out) const {
  TS_CHECK(out.size() == layout_->params.size(), "zero", "expected an output per parameter (",
           layout_->params.size(), "), got ", out.size());
  for (size_t g = 0; g < shard_params().size(); ++g) {
    const ZeroGroupPlan& gp = layout_->plan.groups[g];
    bool wanted = false;
    for (const FlatSlot& s : gp.slots) wanted |= out[s.param].defined();
    // Every rank must agree: the outputs' definedness is the caller's, the same on every rank.
    if (!wanted) continue;
    Tensor all = empty({gp.padded_numel()}, {.dtype = DType::f32, .device = layout_->shard_device});
    layout_->comm->all_gather(shard_params()[g].detach(), all)->wait();
    for (const FlatSlot& s : gp.slots) {
      if (!out[s.param].defined()) continue;
      out[s.param].reshape({s.numel}).copy_(all.narrow(0, s.offset, s.numel));
    }
  }
}

void ShardedOptimizer::load_masters(const std::vector<Tensor>& values) {
  TS_CHECK(values.size() == layout_->params.size(), "zero", "expected a value per parameter (",
           layout_->params.size(), "), got ", values.size());
  for (size_t p = 0; p < values.size(); ++p) {
    const Tensor& v = values[p];
    TS_CHECK(v.defined() && v.shape() == layout_->params[p].shape(), "zero",
             "expected a value of shape ", shape_str(layout_->params[p].shape()), " for '",
             params_[p].first, "', got ", v.defined() ? v.describe() : "none");
  }
  // Parameter by parameter, every value read on every rank: under stage 3 a value may be a
  // released parameter, whose gather is collective (the same order everywhere, even on ranks that
  // own none of it).
  const Stage3Params::GatherWindow window(stage3());
  for (size_t p = 0; p < values.size(); ++p) {
    const Tensor v = values[p].reshape({values[p].numel()});
    if (stage3()) (void)v.data_ptr();
    const size_t g = layout_->plan.group_of[p];
    for (const OwnedPiece& o : param_owners(layout_->plan, p)) {
      if (o.owner != layout_->comm->rank()) continue;
      shard_params()[g]
          .detach()
          .narrow(0, o.piece.shard_offset, o.piece.numel)
          .copy_(v.narrow(0, o.piece.param_offset, o.piece.numel));
    }
  }
  if (stage3()) parts_.sync->publish(compute_shard());
}

}  // namespace tessera::parallel::zero

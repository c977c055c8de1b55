// Pipeline checkpoints: renumbering optimizer state and gathering the stages (see
// pipeline_state.h).
#include "models/train/pipeline_state.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "core/error.h"
#include "core/factory.h"
#include "optim/state_key.h"

namespace tessera::train {

using nlohmann::json;

ParamOrder ParamOrder::of(const std::vector<std::pair<std::string, Shape>>& params) {
  ParamOrder order;
  std::vector<std::string> rest;
  for (const auto& [name, shape] : params) {
    if (optim::decays_weight(name, int64_t(shape.size())))
      order.names.push_back(name);
    else
      rest.push_back(name);
  }
  order.decaying = order.names.size();
  order.names.insert(order.names.end(), rest.begin(), rest.end());
  return order;
}

int64_t ParamOrder::index(const std::string& name) const {
  const auto it = std::find(names.begin(), names.end(), name);
  return it == names.end() ? -1 : int64_t(it - names.begin());
}

optim::OptimizerState renumber_state(const optim::OptimizerState& state, const ParamOrder& from,
                                     const ParamOrder& to) {
  optim::OptimizerState out;
  out.meta = state.meta;
  TS_CHECK(state.meta.contains("param_groups") && state.meta["param_groups"].size() == 2 &&
               state.meta.contains("state"),
           "checkpoint", "expected optimizer state with two param_groups and a state map, got ",
           state.meta.dump().substr(0, 200));
  // from's k -> to's k (-1: the parameter is not in `to`).
  std::vector<int64_t> k_to(from.names.size());
  for (size_t k = 0; k < from.names.size(); ++k) k_to[k] = to.index(from.names[k]);
  json groups = json::array();
  for (size_t g = 0; g < 2; ++g) {
    json group = state.meta["param_groups"][g];
    json params = json::array();
    const size_t begin = g == 0 ? 0 : to.decaying, end = g == 0 ? to.decaying : to.names.size();
    for (size_t k = begin; k < end; ++k) params.push_back(k);
    group["params"] = params;
    groups.push_back(group);
  }
  out.meta["param_groups"] = groups;
  json entries = json::object();
  for (const auto& [key, entry] : state.meta["state"].items()) {
    const size_t k = size_t(std::stoull(key));
    TS_CHECK(k < k_to.size(), "checkpoint", "optimizer state for parameter ", k, " of ",
             k_to.size());
    if (k_to[k] >= 0) entries[std::to_string(k_to[k])] = entry;
  }
  out.meta["state"] = entries;
  for (const auto& [name, t] : state.tensors) {
    const std::optional<optim::StateKey> key = optim::parse_state_key(name);
    TS_CHECK(key.has_value(), "checkpoint",
             "expected optimizer tensors named state.<k>.<name>, got '", name, "'");
    const size_t k = key->param;
    TS_CHECK(k < k_to.size(), "checkpoint", "optimizer tensor '", name, "' for parameter ", k,
             " of ", k_to.size());
    if (k_to[k] >= 0) out.tensors.emplace_back(optim::state_key(size_t(k_to[k]), key->name), t);
  }
  return out;
}

namespace {

// A JSON document as i64 words (MPI moves it like any tensor).
Tensor json_words(const json& j) {
  const std::string text = j.dump();
  Tensor t = zeros({int64_t(text.size() + 7) / 8}, {.dtype = DType::i64});
  std::memcpy(t.data_ptr(), text.data(), text.size());
  return t;
}

json describe(const io::NamedTensors& tensors) {
  json out = json::array();
  for (const auto& [name, t] : tensors) out.push_back({name, int(t.dtype()), t.shape()});
  return out;
}

void send_tensors(parallel::Communicator& group, const io::NamedTensors& tensors, int tag) {
  for (const auto& [name, t] : tensors) group.send(t.contiguous(), 0, tag)->wait();
}

void recv_tensors(parallel::Communicator& group, const json& described, int from, int tag,
                  io::NamedTensors& into) {
  for (const json& d : described) {
    const std::string name = d[0].get<std::string>();
    Tensor t = empty(d[2].get<Shape>(), {.dtype = DType(d[1].get<int>())});
    group.recv(t, from, tag)->wait();
    const bool held = std::any_of(into.begin(), into.end(),
                                  [&](const auto& entry) { return entry.first == name; });
    if (!held) into.emplace_back(name, t);
  }
}

}  // namespace

void gather_stages(parallel::Communicator& group, io::NamedTensors& model,
                   optim::OptimizerState& state) {
  constexpr int kTag = 7;
  if (group.size() == 1) return;
  if (group.rank() != 0) {
    const json header = {{"model", describe(model)},
                         {"state", describe(state.tensors)},
                         {"entries", state.meta["state"]}};
    Tensor words = json_words(header);
    group.send(from_vector<int64_t>({words.numel()}, {1}), 0, kTag)->wait();
    group.send(words, 0, kTag)->wait();
    send_tensors(group, model, kTag);
    send_tensors(group, state.tensors, kTag);
    return;
  }
  for (int from = 1; from < group.size(); ++from) {
    Tensor size = empty({1}, {.dtype = DType::i64});
    group.recv(size, from, kTag)->wait();
    Tensor words = empty({size.data<int64_t>()[0]}, {.dtype = DType::i64});
    group.recv(words, from, kTag)->wait();
    const char* text = static_cast<const char*>(words.data_ptr());
    const json header = json::parse(std::string(text, strnlen(text, size_t(words.numel()) * 8)));
    recv_tensors(group, header["model"], from, kTag, model);
    recv_tensors(group, header["state"], from, kTag, state.tensors);
    for (const auto& [key, entry] : header["entries"].items()) state.meta["state"][key] = entry;
  }
}

}  // namespace tessera::train

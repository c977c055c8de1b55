// Pipeline checkpoints: renumbering optimizer state between a stage's parameters and the serial
// model's (models/train/pipeline_state.h).
#include <catch2/catch.hpp>

#include "core/factory.h"
#include "models/train/pipeline_state.h"

using namespace tessera;
using namespace tessera::train;
using nlohmann::json;

namespace {

// A serial model of 3 parameters: h.0.w (decays), h.0.ln.weight (no decay), h.1.w (decays).
std::vector<std::pair<std::string, Shape>> serial_params() {
  return {{"h.0.w", {2, 2}}, {"h.0.ln.weight", {2}}, {"h.1.w", {2, 2}}};
}

optim::OptimizerState state_of(const ParamOrder& order, float base) {
  optim::OptimizerState s;
  json groups = json::array();
  groups.push_back({{"lr", 0.1}, {"params", json::array()}});
  groups.push_back({{"lr", 0.1}, {"params", json::array()}});
  s.meta = {{"type", "adamw"}, {"param_groups", groups}, {"state", json::object()}};
  for (size_t k = 0; k < order.names.size(); ++k) {
    s.meta["state"][std::to_string(k)] = {{"step", 3}};
    s.tensors.emplace_back("state." + std::to_string(k) + ".exp_avg",
                           full({2}, base + float(k), {}));
  }
  return s;
}

}  // namespace

TEST_CASE("ParamOrder numbers the decaying group first, as param_groups_with_decay") {
  const ParamOrder order = ParamOrder::of(serial_params());
  CHECK(order.names == std::vector<std::string>{"h.0.w", "h.1.w", "h.0.ln.weight"});
  CHECK(order.decaying == 2);
  CHECK(order.index("h.1.w") == 1);
  CHECK(order.index("h.7.w") == -1);
}

TEST_CASE("A stage's state renumbers to the serial numbering and back") {
  const ParamOrder serial = ParamOrder::of(serial_params());
  // The second stage holds block 1 only: its k 0 is the serial k 1.
  const ParamOrder stage = ParamOrder::of({{"h.1.w", {2, 2}}});
  const optim::OptimizerState local = state_of(stage, 10.0f);
  const optim::OptimizerState up = renumber_state(local, stage, serial);
  REQUIRE(up.tensors.size() == 1);
  CHECK(up.tensors[0].first == "state.1.exp_avg");
  CHECK(up.tensors[0].second.data<float>()[0] == 10.0f);
  CHECK(up.meta["state"].contains("1"));
  CHECK_FALSE(up.meta["state"].contains("0"));
  CHECK(up.meta["param_groups"][0]["params"] == json({0, 1}));
  CHECK(up.meta["param_groups"][1]["params"] == json({2}));

  // A serial checkpoint cut for the stage: the other parameters' state is dropped.
  const optim::OptimizerState whole = state_of(serial, 0.0f);
  const optim::OptimizerState down = renumber_state(whole, serial, stage);
  REQUIRE(down.tensors.size() == 1);
  CHECK(down.tensors[0].first == "state.0.exp_avg");
  CHECK(down.tensors[0].second.data<float>()[0] == 1.0f);  // serial k 1
  CHECK(down.meta["state"].size() == 1);
  CHECK(down.meta["param_groups"][0]["params"] == json({0}));
  CHECK(down.meta["param_groups"][1]["params"] == json::array());
}

TEST_CASE("Renumbering refuses state that is not an optimizer's") {
  const ParamOrder serial = ParamOrder::of(serial_params());
  optim::OptimizerState bad = state_of(serial, 0.0f);
  bad.tensors.emplace_back("exp_avg", full({2}, 0.0f, {}));
  CHECK_THROWS_WITH(renumber_state(bad, serial, serial), Catch::Contains("state.<k>.<name>"));
  optim::OptimizerState beyond = state_of(serial, 0.0f);
  beyond.meta["state"]["9"] = {{"step", 1}};
  CHECK_THROWS_WITH(renumber_state(beyond, serial, serial), Catch::Contains("parameter 9 of 3"));
}

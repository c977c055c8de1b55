// Sharded checkpoints' layout-independent optimizer meta (keyed by parameter name, so a stage or a
// differently numbered layout finds its own), the "optim/<state>/<parameter>" names, and the box
// of a placement's local tensor (models/train/sharded_state.h).
#include "models/train/sharded_state.h"

#include <catch2/catch.hpp>

#include "parallel/tensor/placement.h"

using namespace tessera;
using namespace tessera::train;
using nlohmann::json;

namespace {

// h.0.w and h.1.w decay (group 0), h.0.ln.weight does not (group 1).
ParamOrder serial() {
  return ParamOrder::of({{"h.0.w", {2, 2}}, {"h.0.ln.weight", {2}}, {"h.1.w", {2, 2}}});
}

json indexed_meta() {
  return {
      {"type", "adamw"},
      {"param_groups",
       {{{"lr", 0.1}, {"params", {0, 1}}}, {{"lr", 0.1}, {"weight_decay", 0.0}, {"params", {2}}}}},
      {"state", {{"0", {{"step", 3}}}, {"1", {{"step", 3}}}, {"2", {{"step", 3}}}}}};
}

}  // namespace

TEST_CASE("optimizer meta by name round-trips and renumbers for a stage") {
  const ParamOrder order = serial();
  REQUIRE(order.names == std::vector<std::string>{"h.0.w", "h.1.w", "h.0.ln.weight"});
  const json named = named_optimizer_meta(indexed_meta(), order);
  CHECK(named["param_groups"][0]["params"] == json({"h.0.w", "h.1.w"}));
  CHECK(named["param_groups"][1]["params"] == json({"h.0.ln.weight"}));
  CHECK(named["state"]["h.0.ln.weight"]["step"] == 3);
  CHECK(indexed_optimizer_meta(named, order) == indexed_meta());

  // A pipeline stage holding h.1.w only: its numbering, its state.
  const ParamOrder stage = ParamOrder::of({{"h.1.w", {2, 2}}});
  const json mine = indexed_optimizer_meta(named, stage);
  CHECK(mine["param_groups"][0]["params"] == json({0}));
  CHECK(mine["param_groups"][1]["params"] == json::array());
  CHECK(mine["state"] == json({{"0", {{"step", 3}}}}));
  CHECK(mine["param_groups"][1]["weight_decay"] == 0.0);

  // Two stages' metas merge into the whole model's.
  const json first = named_optimizer_meta(
      {{"type", "adamw"},
       {"param_groups", {{{"lr", 0.1}, {"params", {0}}}, {{"lr", 0.1}, {"params", {1}}}}},
       {"state", {{"0", {{"step", 3}}}, {"1", {{"step", 3}}}}}},
      ParamOrder::of({{"h.0.w", {2, 2}}, {"h.0.ln.weight", {2}}}));
  const json second = named_optimizer_meta(
      {{"type", "adamw"},
       {"param_groups", {{{"lr", 0.1}, {"params", {0}}}, {{"lr", 0.1}, {"params", json::array()}}}},
       {"state", {{"0", {{"step", 3}}}}}},
      stage);
  const json merged = merge_named_meta({first, second});
  CHECK(merged["param_groups"][0]["params"] == json({"h.0.w", "h.1.w"}));
  CHECK(merged["state"].size() == 3);

  // A parameter the checkpoint's groups do not list is another model's.
  CHECK_THROWS_WITH(indexed_optimizer_meta(named, ParamOrder::of({{"h.9.w", {2, 2}}})),
                    Catch::Contains("parameter 'h.9.w' is in no optimizer parameter group"));
}

TEST_CASE("optimizer tensor names carry the state and the parameter") {
  std::string what, param;
  REQUIRE(parse_optimizer_tensor_name(optimizer_tensor_name("exp_avg", "h.0.attn.c_attn.weight"),
                                      what, param));
  CHECK(what == "exp_avg");
  CHECK(param == "h.0.attn.c_attn.weight");
  CHECK_FALSE(parse_optimizer_tensor_name("h.0.w", what, param));
  CHECK_FALSE(parse_optimizer_tensor_name("optim/exp_avg", what, param));
}

TEST_CASE("a placement's local tensor is a box of its view, a ZeRO range a flat part of it") {
  // q|k|v (12, 4) as (3, 4, 4), heads split in 2, rank 1.
  const auto p = parallel::tensor::split({12, 4}, 1, 2, 1, "tensor", {3, 4, 4});
  io::PieceBox box = local_box(p);
  CHECK(box.global == Shape{12, 4});
  CHECK(box.offsets == std::vector<int64_t>{0, 2, 0});
  CHECK(box.box_shape() == Shape{3, 2, 4});
  CHECK(box.range_numel() == shape_numel(p.local_shape()));
  box = local_box(p, 5, 7);
  CHECK((box.begin == 5 && box.end == 12));
  // A padded vocabulary: (10, 4) in (12, 4), rank 2 of 3 holds rows [8, 12), two of them padding.
  const auto v = parallel::tensor::split({10, 4}, 0, 3, 2, "tensor", {12, 4});
  const std::vector<io::Run> runs = io::piece_runs(local_box(v));
  REQUIRE(runs.size() == 1);
  CHECK((runs[0].global == 32 && runs[0].length == 8 && runs[0].local == 0));
}

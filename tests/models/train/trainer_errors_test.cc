// The trainer's failure modes: f16 steps skipped by the loss scaler, a diverging run, layouts and
// features not implemented yet, a corrupt checkpoint.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "models/data/token_file.h"
#include "models/train/synthetic_data.h"
#include "models/train/train_device.h"
#include "models/train/trainer.h"
#include "tests/models/train/train_test_util.h"

using namespace tessera;
using namespace tessera::train;
using nlohmann::json;
namespace fs = std::filesystem;

using namespace tessera::train::testing;

TEST_CASE("f16 with dynamic loss scaling skips steps with inf gradients and still learns") {
  json j = tiny_gpt();
  j["precision"] = {{"dtype", "f16"},
                    {"loss_scale", {{"init_scale", 1e12}, {"growth_interval", 1000}}}};
  TrainSummary s = train_json(j);
  CHECK(s.skipped_steps > 0);  // 1e12 overflows f16 gradients until the scale backs off
  CHECK(s.skipped_steps < 30);
  for (double l : s.losses) CHECK(std::isfinite(l));
  CHECK(mean_tail(s.losses, 5) < s.losses.front() - 1.0);
}

TEST_CASE("a diverging run stops with a clear error instead of training on NaN") {
  json j = tiny_gpt();
  j["optimizer"]["lr"] = 1e30;
  j["train"]["grad_clip"] = 0.0;
  CHECK_THAT(error_of(j), Catch::Contains("[train] the loss is") && Catch::Contains("diverged"));
}

TEST_CASE("layouts and features not available yet are rejected in the product's words") {
  json j = tiny_gpt();
  // Mode 2.5d names the numbers that do not split over each of its depth layers' grids.
  j["parallel"] = {{"tensor", {{"size", 8}, {"mode", "2.5d"}, {"depth", 2}}}};
  j["model"]["n_heads"] = 1;
  CHECK_THAT(error_of(j), Catch::Contains("parallel.tensor.mode 2.5d on a 2 x 2 grid of depth 2: "
                                          "expected model.n_heads 1 divisible by q = 2") &&
                              !Catch::Contains("issue"));
  j = tiny_gpt();
  j["parallel"] = {{"tensor", {{"size", 8}, {"mode", "2.5d"}, {"depth", 2}}}, {"pipeline", 2}};
  // 2.5D (and 2D, 3D) run inside pipeline stages: the layout is legal, it only needs its ranks.
  CHECK_THAT(error_of(j), Catch::Contains("do not divide into pipeline x sequence x tensor = 16"));
  // Mode 2d names the numbers that do not split over its q x q grid.
  j = tiny_gpt();
  j["parallel"] = {{"tensor", {{"size", 4}, {"mode", "2d"}}}};
  j["model"]["n_heads"] = 1;
  CHECK_THAT(error_of(j), Catch::Contains("expected model.n_heads 1 divisible by q = 2"));
  j = tiny_gpt();
  j["parallel"] = {{"tensor", {{"size", 16}, {"mode", "2d"}}}};
  j["model"]["n_heads"] = 4;
  j["model"]["d_model"] = 24;
  CHECK_THAT(error_of(j), Catch::Contains("expected model.d_model 24 divisible by q^2 = 16"));
  j = tiny_gpt();
  j["parallel"] = {{"tensor", {{"size", 4}, {"mode", "2d"}}}, {"pipeline", 2}};
  CHECK_THAT(error_of(j), Catch::Contains("do not divide into pipeline x sequence x tensor = 8"));
  j = tiny_gpt();
  j["parallel"] = {{"tensor", {{"size", 2}, {"mode", "1d"}}}};  // fine, but needs 2 ranks
  CHECK_THAT(error_of(j), Catch::Contains("do not divide into pipeline x sequence x tensor = 2"));
  j = tiny_gpt();
  j["zero"] = {{"stage", 2}};
  CHECK_THAT(error_of(j), Catch::Contains("zero.stage 2") && Catch::Contains("ZeRO"));
  // On GPUs: tensor layouts and ZeRO (offload too) are checked like on the CPU (here: the ranks
  // they need, or the GPU), before any GPU is looked for; pipelines are refused by name.
  j = tiny_gpt();
  j["train"]["device"] = "cuda";
  j["parallel"] = {{"tensor", {{"size", 2}, {"mode", "1d"}}}};
  CHECK_THAT(error_of(j), Catch::Contains("do not divide into pipeline x sequence x tensor = 2") &&
                              !Catch::Contains("train.device"));
  j["parallel"] = {{"pipeline", 2}};
  CHECK_THAT(error_of(j), Catch::Contains("parallel.pipeline 2 with train.device cuda: pipeline "
                                          "parallelism runs on the CPU"));
  j["parallel"] = json::object();
  j["zero"] = {{"stage", 2}, {"offload", true}};
  if (!cuda_usable())
    CHECK_THAT(error_of(j),
               Catch::Contains("[config] train.device cuda: " + cuda_unavailable_reason()));
  j = tiny_gpt();
  j["parallel"] = {{"data", 2}};
  CHECK_THAT(error_of(j), Catch::Contains("= 2 ranks, but the job has 1"));
  j = tiny_gpt();
  j["train"]["batch_size"] = 6;
  j["train"]["micro_batch_size"] = 4;
  CHECK_THAT(error_of(j), Catch::Contains("train.batch_size 6 must be a multiple"));
}

TEST_CASE("a corrupt checkpoint ends in an error naming the file") {
  json j = tiny_gpt();
  j["train"]["steps"] = 2;
  const std::string dir = fresh_dir("corrupt");
  j["checkpoint"] = {{"dir", dir}};
  train_json(j);
  const std::string model = dir + "/step-00000002/model.safetensors";
  REQUIRE(fs::exists(model));
  {
    std::fstream f(model, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-16, std::ios::end);
    f.write("garbage!garbage!", 16);
  }
  j["train"]["steps"] = 4;
  CHECK_THAT(error_of(j), Catch::Contains("model.safetensors"));
}

// Configuration mistakes whose messages must say what to change: a directory given as the config
// file, and a decaying schedule whose warmup does not end before training does.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "models/train/train_config.h"
#include "tests/testing/temp_dir.h"

using namespace tessera;
using namespace tessera::train;
using nlohmann::json;
using tessera::testing::TempDir;

namespace {

json with_schedule(const json& schedule, int64_t steps) {
  json j = json::parse(R"({"model": {"type": "gpt", "preset": "gpt-tiny"},
                          "train": {"batch_size": 4}})");
  j["train"]["steps"] = steps;
  j["schedule"] = schedule;
  return j;
}

std::string error_of(const json& j) {
  try {
    TrainConfig::from_json(j);
  } catch (const ValueError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("a directory given as the configuration is reported as a directory", "[config]") {
  TempDir tmp("config-errors");
  std::filesystem::create_directory(tmp.file("configs"));
  const std::string dir = tmp.file("configs");
  const std::string msg = [&] {
    try {
      load_train_config(dir, {});
    } catch (const ValueError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  }();
  CHECK_THAT(msg, Catch::Contains(dir + ": is a directory") &&
                      Catch::Contains("expected a JSON configuration file"));
  CHECK_THAT(msg, !Catch::Contains("invalid JSON"));
}

TEST_CASE("train.steps not above schedule.warmup_steps names both keys and what to set",
          "[config]") {
  const std::string msg = error_of(with_schedule({{"type", "cosine"}, {"warmup_steps", 700}}, 100));
  CHECK_THAT(msg, Catch::Contains("train.steps (100) must be greater than "
                                  "schedule.warmup_steps (700) for a cosine schedule"));
  CHECK_THAT(msg, Catch::Contains("set train.steps to more than 700 or schedule.warmup_steps to "
                                  "less than 100"));
  // Equal is refused too: the decay would have no steps.
  CHECK_THAT(error_of(with_schedule({{"type", "linear"}, {"warmup_steps", 10}}, 10)),
             Catch::Contains("train.steps (10) must be greater than schedule.warmup_steps (10) "
                             "for a linear schedule"));
  // An explicit schedule.total_steps is the key to change then.
  CHECK_THAT(error_of(with_schedule({{"type", "cosine"}, {"warmup_steps", 50}, {"total_steps", 20}},
                                    1000)),
             Catch::Contains("schedule.total_steps (20) must be greater than "
                             "schedule.warmup_steps (50)") &&
                 Catch::Contains("set schedule.total_steps to more than 50"));
  // What still works: a warmup that ends in time, and a constant schedule of any warmup.
  CHECK(error_of(with_schedule({{"type", "cosine"}, {"warmup_steps", 5}}, 6)) == "no error");
  CHECK(error_of(with_schedule({{"type", "constant"}, {"warmup_steps", 50}}, 6)) == "no error");
}

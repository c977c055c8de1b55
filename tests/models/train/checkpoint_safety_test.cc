// The trainer loses no run and no checkpoint: 16-bit runs finish with their sample, a diverged run
// stops before it overwrites good checkpoints, fresh runs never mix with earlier ones, one run at a
// time per directory, interrupted saves are cleared, a damaged latest checkpoint is refused, a
// resume names the settings it changed, metrics are not repeated, and a signal saves and stops.
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "models/io/checkpoint.h"
#include "models/io/dir_lock.h"
#include "models/train/trainer.h"
#include "tests/models/train/train_test_util.h"

using namespace tessera;
using namespace tessera::train;
using nlohmann::json;
namespace fs = std::filesystem;

using namespace tessera::train::testing;

namespace {

std::vector<int64_t> steps_in(const std::string& root) {
  std::vector<int64_t> out;
  for (const io::CheckpointEntry& e : io::list_checkpoints(root)) out.push_back(e.step);
  return out;
}

// A short run with checkpoints every `every` steps under `dir`.
json checkpointed(const std::string& dir, int64_t steps, int64_t every) {
  json j = tiny_gpt();
  j["train"]["steps"] = steps;
  j["train"]["eval_batches"] = 1;
  j["checkpoint"] = {{"dir", dir}, {"every", every}};
  return j;
}

std::string run_printing(const json& j, const TrainerOptions& extra = {}) {
  std::ostringstream out;
  TrainerOptions options = extra;
  options.out = &out;
  run_training(TrainConfig::from_json(j), nullptr, options);
  return out.str();
}

std::vector<json> read_jsonl(const std::string& path) {
  std::vector<json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    json record = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!record.is_discarded()) out.push_back(record);  // a line being written
  }
  return out;
}

}  // namespace

TEST_CASE("bf16 and f16 runs end with their generated sample, exit cleanly") {
  for (const char* dtype : {"bf16", "f16"}) {
    INFO("precision " << dtype);
    json j = tiny_gpt();
    j["precision"]["dtype"] = dtype;
    j["train"]["steps"] = 3;
    j["train"]["sample_tokens"] = 8;
    std::string out;
    REQUIRE_NOTHROW(out = run_printing(j));
    CHECK_THAT(out, Catch::Contains("sample (temperature"));
  }
}

TEST_CASE("a diverged f16 run stops and keeps the good checkpoints") {
  const std::string dir = fresh_dir("diverged");
  json j = checkpointed(dir, 6, 3);
  j["precision"]["dtype"] = "f16";
  j["checkpoint"]["keep"] = 2;
  train_json(j);
  REQUIRE(steps_in(dir) == std::vector<int64_t>{3, 6});

  SECTION("a non-finite loss stops the run") {
    j["optimizer"]["lr"] = 1e6;  // f16 weights overflow after the first resumed step
    j["train"]["steps"] = 12;
    CHECK_THAT(error_of(j), Catch::Contains("diverged"));
  }
  SECTION("weights that are no longer finite are never checkpointed") {
    j["optimizer"]["lr"] = 1e6;
    j["train"]["steps"] = 12;
    j["checkpoint"]["every"] = 1;  // a save right after the step that broke the weights
    CHECK_THAT(error_of(j), Catch::Contains("inf or NaN after step 7") &&
                                Catch::Contains("not saving a checkpoint"));
  }
  // Either way the good checkpoints are intact and nothing later was written.
  CHECK(steps_in(dir) == std::vector<int64_t>{3, 6});
  CHECK(io::load_checkpoint(dir + "/step-00000006").state["step"] == 6);
}

TEST_CASE("a run whose every step in a window is skipped by the loss scaler stops") {
  json j = tiny_gpt();
  // A scale that overflows every f16 gradient and cannot back off: every step is skipped.
  j["precision"] = {{"dtype", "f16"},
                    {"skip_limit", 4},
                    {"loss_scale", {{"init_scale", 1e30}, {"min_scale", 1e30}}}};
  CHECK_THAT(error_of(j), Catch::Contains("skipped 4 steps in a row") &&
                              Catch::Contains("steps 1-4") && Catch::Contains("skip_limit"));
  j["precision"]["skip_limit"] = 0;  // off: the run goes on skipping
  j["train"]["steps"] = 6;
  CHECK(train_json(j).skipped_steps == 6);
}

TEST_CASE("a fresh run refuses a directory of an earlier run's checkpoints unless overwriting") {
  const std::string dir = fresh_dir("mixed");
  train_json(checkpointed(dir, 8, 4));  // the earlier run: steps 4 and 8
  json j = checkpointed(dir, 4, 2);
  j["checkpoint"]["resume"] = false;
  CHECK_THAT(error_of(j), Catch::Contains("holds checkpoints of an earlier run (steps 4 and 8)") &&
                              Catch::Contains("checkpoint.overwrite"));
  CHECK(steps_in(dir) == std::vector<int64_t>{4, 8});  // untouched

  j["checkpoint"]["overwrite"] = true;
  const std::string out = run_printing(j);
  CHECK_THAT(out, Catch::Contains("deleted the earlier run's checkpoints (steps 4 and 8)"));
  CHECK(steps_in(dir) == std::vector<int64_t>{2, 4});
  // A later resume continues the new run, not the old one.
  j["checkpoint"].erase("overwrite");
  j["checkpoint"]["resume"] = true;
  j["train"]["steps"] = 5;
  CHECK(train_json(j).start_step == 4);

  j["checkpoint"]["overwrite"] = true;  // overwrite with resume is a contradiction
  CHECK_THAT(error_of(j), Catch::Contains("checkpoint.overwrite") &&
                              Catch::Contains("checkpoint.resume false"));
}

TEST_CASE("a second run in a locked checkpoint directory stops at once, naming the first") {
  const std::string dir = fresh_dir("locked");
  io::DirectoryLock first(dir, "test");  // another run holds the directory
  CHECK_THAT(error_of(checkpointed(dir, 2, 1)),
             Catch::Contains("in use by another run (pid " + std::to_string(::getpid()) +
                             " on host"));
  CHECK(steps_in(dir).empty());
}

TEST_CASE("the lock is released when the run ends") {
  const std::string dir = fresh_dir("unlocked");
  train_json(checkpointed(dir, 2, 1));
  CHECK_NOTHROW(io::DirectoryLock(dir, "test"));
}

TEST_CASE("interrupted saves are removed at start-up") {
  const std::string dir = fresh_dir("stale");
  fs::create_directories(dir + "/step-00000003.tmp-abc123");
  std::ofstream(dir + "/step-00000003.tmp-abc123/model.safetensors") << "partial";
  fs::create_directories(dir + "/step-00000002.old-42");
  fs::create_directories(dir + "/notes.tmp-keep");  // not ours: left alone
  const std::string out = run_printing(checkpointed(dir, 2, 1));
  CHECK_THAT(out, Catch::Contains("removed an interrupted checkpoint save"));
  CHECK_FALSE(fs::exists(dir + "/step-00000003.tmp-abc123"));
  CHECK_FALSE(fs::exists(dir + "/step-00000002.old-42"));
  CHECK(fs::exists(dir + "/notes.tmp-keep"));
  CHECK(steps_in(dir) == std::vector<int64_t>{1, 2});
}

TEST_CASE("a damaged latest checkpoint is refused; checkpoint.resume_step picks an earlier one") {
  const std::string dir = fresh_dir("damaged");
  train_json(checkpointed(dir, 6, 3));
  std::ofstream(dir + "/step-00000006/state.json") << "{ not json";
  json j = checkpointed(dir, 8, 3);
  CHECK_THAT(error_of(j), Catch::Contains("step-00000006/state.json") &&
                              Catch::Contains("checkpoint.resume_step (steps 3)"));
  fs::remove(dir + "/step-00000006/state.json");  // missing is refused the same way
  CHECK_THAT(error_of(j), Catch::Contains("step-00000006/state.json: file is missing"));

  j["checkpoint"]["resume_step"] = 3;
  CHECK(train_json(j).start_step == 3);
  j["checkpoint"]["resume_step"] = 5;
  CHECK_THAT(error_of(j), Catch::Contains("checkpoint.resume_step 5: no checkpoint"));
}

TEST_CASE("a resume says which settings changed since the checkpoint") {
  const std::string dir = fresh_dir("changed");
  train_json(checkpointed(dir, 2, 2));
  json j = checkpointed(dir, 3, 2);
  CHECK_THAT(run_printing(j), !Catch::Contains("warning: changed"));
  fs::remove_all(dir + "/step-00000003");
  j["train"]["seed"] = 99;
  j["train"]["batch_size"] = 4;
  const std::string out = run_printing(j);
  CHECK_THAT(out, Catch::Contains("warning: changed since the checkpoint") &&
                      Catch::Contains("train.seed 1234 -> 99") &&
                      Catch::Contains("train.batch_size 8 -> 4") &&
                      !Catch::Contains("precision.dtype"));
}

TEST_CASE("after a resume the metrics file holds each step once") {
  const std::string dir = fresh_dir("metrics");
  const std::string metrics = dir + "_metrics.jsonl";
  json j = checkpointed(dir, 6, 3);
  j["logging"] = {{"progress", false}, {"metrics", metrics}, {"log_every", 1}};
  train_json(j);
  fs::remove_all(dir + "/step-00000006");  // as if the run died after step 6's metrics
  std::ofstream(metrics, std::ios::app) << "{\"step\": 7, \"lo";  // and a torn line
  train_json(j);  // resumes at 3, redoes 4..6
  std::vector<int64_t> train_steps;
  for (const json& r : read_jsonl(metrics))
    if (!r.contains("eval")) train_steps.push_back(r["step"].get<int64_t>());
  CHECK(train_steps == std::vector<int64_t>{1, 2, 3, 4, 5, 6});
}

TEST_CASE("a signal stops the run after the step with a checkpoint it resumes from") {
  const std::string dir = fresh_dir("signal");
  const std::string metrics = dir + "_metrics.jsonl";
  json j = checkpointed(dir, 100000, 0);
  j["logging"] = {{"progress", false}, {"metrics", metrics}, {"log_every", 1}};
  // The signal goes out once the run has taken a step (its handlers are installed by then).
  std::thread sender([&] {
    for (int i = 0; i < 600 && read_jsonl(metrics).size() < 2; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ::kill(::getpid(), SIGTERM);
  });
  std::string error = "no error";
  try {
    run_training(TrainConfig::from_json(j), nullptr, {.handle_signals = true});
  } catch (const ValueError& e) {
    error = e.what();
  }
  sender.join();
  CHECK_THAT(error, Catch::Contains("stopped by SIGTERM after step") &&
                        Catch::Contains("checkpoint saved"));
  const std::vector<int64_t> saved = steps_in(dir);
  REQUIRE(saved.size() == 1);
  CHECK(saved[0] >= 2);
  j["train"]["steps"] = saved[0] + 1;
  CHECK(train_json(j).start_step == saved[0]);
}

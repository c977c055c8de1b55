// A run stopped at step k and resumed from its checkpoint gives the losses of an uninterrupted run,
// bit for bit (f32 and bf16 with master weights, with dropout and gradient accumulation).
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "models/data/token_file.h"
#include "models/train/synthetic_data.h"
#include "models/train/trainer.h"
#include "tests/models/train/train_test_util.h"

using namespace tessera;
using namespace tessera::train;
using nlohmann::json;
namespace fs = std::filesystem;

using namespace tessera::train::testing;

TEST_CASE("stopping at step k and resuming gives the same losses bit for bit") {
  for (const char* dtype : {"f32", "bf16"}) {
    INFO("precision " << dtype);
    json j = tiny_gpt();
    j["model"]["dropout"] = 0.1;  // the RNG state must be restored too
    j["precision"]["dtype"] = dtype;
    j["schedule"] = {{"type", "cosine"}, {"warmup_steps", 2}, {"total_steps", 8}, {"min_lr", 1e-3}};
    j["train"]["steps"] = 8;
    j["train"]["micro_batch_size"] = 4;  // 2 accumulation steps
    j["checkpoint"] = {{"dir", fresh_dir(std::string("full_") + dtype)}, {"every", 4}};
    TrainSummary full = train_json(j);
    REQUIRE(full.losses.size() == 8);

    j["checkpoint"]["dir"] = fresh_dir(std::string("parts_") + dtype);
    j["train"]["steps"] = 3;  // stop at step 3
    TrainSummary first = train_json(j);
    CHECK(first.losses.size() == 3);
    j["train"]["steps"] = 8;
    TrainSummary rest = train_json(j);
    CHECK(rest.start_step == 3);
    REQUIRE(rest.losses.size() == 5);
    for (size_t i = 0; i < 3; ++i) CHECK(first.losses[i] == full.losses[i]);
    for (size_t i = 0; i < 5; ++i) CHECK(rest.losses[i] == full.losses[i + 3]);
    CHECK(rest.last_eval["val_loss"] == full.last_eval["val_loss"]);
  }
}

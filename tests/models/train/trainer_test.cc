// Short single-process training runs: the loss falls for GPT (built-in text and a token file),
// BERT and ViT, and each reports its evaluation metrics.
#include "models/train/trainer.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "models/data/token_file.h"
#include "models/train/synthetic_data.h"
#include "tests/models/train/train_test_util.h"

using namespace tessera;
using namespace tessera::train;
using nlohmann::json;
namespace fs = std::filesystem;

using namespace tessera::train::testing;

TEST_CASE("a tiny GPT's loss falls on the built-in text") {
  TrainSummary s = train_json(tiny_gpt());
  REQUIRE(s.losses.size() == 40);
  CHECK(s.losses.front() == Approx(std::log(256.0)).margin(0.3));
  CHECK(mean_tail(s.losses, 5) < s.losses.front() - 2.0);
  REQUIRE(s.last_eval.contains("val_loss"));
  CHECK(s.last_eval["val_loss"].get<double>() < 3.5);
  CHECK(s.last_eval["val_ppl"].get<double>() ==
        Approx(std::exp(s.last_eval["val_loss"].get<double>())));
}

TEST_CASE("a tiny BERT learns masked tokens and reports MLM accuracy") {
  json j = json::parse(R"({
    "model": {"type": "bert", "vocab_size": 260, "max_positions": 32, "n_layers": 1, "n_heads": 2,
              "d_model": 32, "mlp_hidden": 64, "dropout": 0.0, "attn_dropout": 0.0},
    "optimizer": {"type": "adamw", "lr": 1e-2},
    "train": {"steps": 40, "batch_size": 8, "threads": 2, "eval_batches": 2},
    "data": {"builtin_tokens": 65536, "builtin_val_tokens": 4096},
    "logging": {"progress": false}
  })");
  TrainSummary s = train_json(j);
  CHECK(mean_tail(s.losses, 5) < s.losses.front() - 1.5);
  REQUIRE(s.last_eval.contains("mlm_accuracy"));
  CHECK(s.last_eval["mlm_accuracy"].get<double>() > 0.1);  // chance: 1/256
}

TEST_CASE("a tiny ViT learns the grating images and reports top-1 accuracy") {
  json j = json::parse(R"({
    "model": {"type": "vit", "image_size": 16, "patch_size": 4, "num_classes": 4, "n_layers": 1,
              "n_heads": 2, "d_model": 32},
    "optimizer": {"type": "adamw", "lr": 3e-3},
    "train": {"steps": 40, "batch_size": 16, "threads": 2, "eval_batches": 4},
    "data": {"image_noise": 0.3},
    "logging": {"progress": false}
  })");
  TrainSummary s = train_json(j);
  CHECK(mean_tail(s.losses, 5) < s.losses.front() - 0.5);
  REQUIRE(s.last_eval.contains("top1"));
  CHECK(s.last_eval["top1"].get<double>() > 0.5);  // chance: 0.25
}

TEST_CASE("the GPT trainer reads a token file given as data.path") {
  const std::string dir = fresh_dir("token_file");
  fs::create_directories(dir);
  const std::string path = dir + "/text.tok";
  {
    data::TokenFileWriter w(path, 256);
    const std::string text = generate_grammar_text(5, 40000);
    std::vector<uint32_t> ids(text.begin(), text.end());
    w.append(ids);
    w.finish();
  }
  json j = tiny_gpt();
  j["data"] = {{"path", path}, {"val_path", path}};
  j["train"]["steps"] = 20;
  TrainSummary s = train_json(j);
  CHECK(mean_tail(s.losses, 3) < s.losses.front() - 1.0);
  CHECK(s.last_eval.contains("val_loss"));
  const std::string missing = dir + "/no_such_file.tok";
  j["data"]["path"] = missing;
  CHECK_THAT(error_of(j), Catch::Contains(missing));
  j["data"]["path"] = path;
  j["model"]["vocab_size"] = 100;
  CHECK_THAT(error_of(j), Catch::Contains("vocabulary") && Catch::Contains("100"));
}

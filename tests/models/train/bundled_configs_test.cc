// Every bundled configuration under tools/configs reads, and the tiny ones fit this machine's
// trainer as they are (built-in data, layouts that need no GPU).
#include <catch2/catch.hpp>
#include <filesystem>

#include "models/train/train_config.h"

using namespace tessera::train;

TEST_CASE("the bundled configs read and say what they train") {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("tools/configs")) {
    if (entry.path().extension() != ".json") continue;
    INFO(entry.path().string());
    TrainConfig c = load_train_config(entry.path().string(), {});
    CHECK(c.source.contains("description"));
    CHECK(c.train.steps > 0);
    ++count;
  }
  CHECK(count >= 8);
  TrainConfig gpt = load_train_config("tools/configs/gpt-tiny.json", {});
  CHECK(gpt.kind == ModelKind::gpt);
  CHECK(gpt.data.path.empty());
  TrainConfig bert = load_train_config("tools/configs/bert-tiny.json", {});
  CHECK(bert.kind == ModelKind::bert);
  CHECK(bert.bert.vocab_size > 256);  // bytes + [MASK]
  TrainConfig vit = load_train_config("tools/configs/vit-tiny.json", {});
  CHECK(vit.kind == ModelKind::vit);
  TrainConfig big = load_train_config("tools/configs/gpt2-124m.json", {});
  CHECK(big.gpt.d_model == 768);
  CHECK(big.precision.dtype == "bf16");
  CHECK(big.train.device == "cpu");
  // The GPU machine's config: GPT-2 124M in bf16 with AdamW on CUDA, on data that needs no files.
  TrainConfig gpu = load_train_config("tools/configs/gpt2-124m-cuda.json", {});
  CHECK(gpu.train.device == "cuda");
  CHECK(gpu.gpt.d_model == 768);
  CHECK(gpu.gpt.n_layers == 12);
  CHECK(gpu.precision.dtype == "bf16");
  CHECK(gpu.optimizer["type"] == "adamw");
  CHECK(gpu.seq_len() == 1024);
  CHECK(gpu.train.batch_size * gpu.seq_len() >= 100000);  // a realistic batch of tokens
  CHECK(gpu.data.path.empty());
}

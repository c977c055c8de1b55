// Every bundled configuration under tools/configs reads, and each tiny one trains on this
// machine as shipped (built-in data, layouts that need no GPU): a short run of the file itself,
// made cheap only through --set overrides, lowers its loss and writes its metrics and checkpoint.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "models/io/checkpoint.h"
#include "models/train/train_config.h"
#include "models/train/trainer.h"
#include "tests/testing/temp_dir.h"

using namespace tessera::train;
using tessera::testing::TempDir;
namespace fs = std::filesystem;

namespace {

double mean(const std::vector<double>& v, size_t begin, size_t end) {
  return std::accumulate(v.begin() + begin, v.begin() + end, 0.0) / double(end - begin);
}

// What makes a run of a tiny config take seconds on 2 cores: fewer steps, a short warm-up, small
// batches and built-in data sets, a short evaluation and no closing sample. Checkpoints and
// metrics go to `tmp` instead of the config's runs/ folder.
std::vector<std::string> quick_run(const TempDir& tmp, int64_t steps, int64_t batch_size) {
  return {"train.steps=" + std::to_string(steps),
          "train.batch_size=" + std::to_string(batch_size),
          "train.threads=2",
          "train.eval_every=0",
          "train.eval_batches=2",
          "schedule.warmup_steps=5",
          "checkpoint.dir=" + tmp.file("ckpt"),
          "logging.metrics=" + tmp.file("metrics.jsonl"),
          "logging.log_every=10",
          "logging.progress=false"};
}

struct TinyRun {
  const char* file;
  int64_t steps;
  int64_t batch_size;
  std::vector<std::string> data;  // the built-in data's size, the closing sample
  double min_fall;                // the last steps' mean loss is at least this below the first's
  const char* metric;             // reported by the closing evaluation
};

}  // namespace

TEST_CASE("the bundled configs read and say what they train") {
  int count = 0;
  for (const auto& entry : fs::directory_iterator("tools/configs")) {
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

TEST_CASE("each tiny bundled config trains: its loss falls within a few steps") {
  const std::vector<TinyRun> runs = {
      {.file = "tools/configs/gpt-tiny.json",
       .steps = 40,
       .batch_size = 8,
       .data = {"train.sample_tokens=0", "data.builtin_tokens=65536",
                "data.builtin_val_tokens=4096"},
       .min_fall = 1.5,
       .metric = "val_loss"},
      {.file = "tools/configs/bert-tiny.json",
       .steps = 40,
       .batch_size = 8,
       .data = {"data.builtin_tokens=65536", "data.builtin_val_tokens=4096"},
       .min_fall = 1.5,
       .metric = "mlm_accuracy"},
      {.file = "tools/configs/vit-tiny.json",
       .steps = 40,
       .batch_size = 16,
       .data = {"data.builtin_images=2048"},
       .min_fall = 0.5,
       .metric = "top1"},
  };
  for (const TinyRun& run : runs) {
    INFO(run.file);
    const TempDir tmp;
    std::vector<std::string> overrides = quick_run(tmp, run.steps, run.batch_size);
    overrides.insert(overrides.end(), run.data.begin(), run.data.end());
    const TrainConfig config = load_train_config(run.file, overrides);
    // Only the run's length and sizes change: the model, optimizer and precision are the file's.
    const TrainConfig shipped = load_train_config(run.file, {});
    CHECK(config.source["model"] == shipped.source["model"]);
    CHECK(config.source["optimizer"] == shipped.source["optimizer"]);
    CHECK(config.source["precision"] == shipped.source["precision"]);

    const TrainSummary s = run_training(config, nullptr);
    REQUIRE(s.losses.size() == size_t(run.steps));
    const double first = mean(s.losses, 0, 5);
    const double last = mean(s.losses, s.losses.size() - 5, s.losses.size());
    INFO("mean loss of the first 5 steps " << first << ", of the last 5 " << last);
    CHECK(std::isfinite(last));
    CHECK(last < first - run.min_fall);
    CHECK(s.last_eval.contains(run.metric));

    std::ifstream metrics(tmp.file("metrics.jsonl"));
    std::string line;
    int records = 0;
    while (std::getline(metrics, line)) ++records;
    CHECK(records >= int(run.steps / 10));
    CHECK(fs::is_directory(tessera::io::checkpoint_dir(tmp.file("ckpt"), run.steps)));
  }
}

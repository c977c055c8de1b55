// Helpers shared by the trainer tests: a tiny GPT configuration and single-process runs.
#pragma once

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "models/train/trainer.h"
#include "tests/testing/temp_dir.h"

namespace tessera::train::testing {

using nlohmann::json;

inline json tiny_gpt() {
  return json::parse(R"({
    "model": {"type": "gpt", "vocab_size": 256, "context_length": 32, "n_layers": 1, "n_heads": 2,
              "d_model": 32},
    "optimizer": {"type": "adamw", "lr": 1e-2},
    "train": {"steps": 40, "batch_size": 8, "threads": 2, "eval_batches": 2, "sample_tokens": 0},
    "data": {"builtin_tokens": 65536, "builtin_val_tokens": 4096},
    "logging": {"progress": false}
  })");
}

inline TrainSummary train_json(const json& j) {
  return run_training(TrainConfig::from_json(j), nullptr);
}

inline double mean_tail(const std::vector<double>& v, size_t n) {
  double s = 0;
  for (size_t i = v.size() - n; i < v.size(); ++i) s += v[i];
  return s / double(n);
}

// This test process's own temporary directory, removed when the process exits.
inline const tessera::testing::TempDir& process_temp_dir() {
  static const tessera::testing::TempDir dir("tessera_train_test");
  return dir;
}

// "<process temp dir>/<name>", which does not exist (removed if an earlier call of this process
// left it): a checkpoint or data directory for the trainer to create.
inline std::string fresh_dir(const std::string& name) {
  const std::filesystem::path dir = process_temp_dir().path() / name;
  std::filesystem::remove_all(dir);
  return dir.string();
}

inline std::string error_of(const json& j) {
  try {
    train_json(j);
  } catch (const ValueError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace tessera::train::testing

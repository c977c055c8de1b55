// The progress line's fields and formats, and the metrics file's JSON lines.
#include "models/train/progress.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "tests/testing/temp_dir.h"

using namespace tessera::train;
using tessera::testing::TempDir;

TEST_CASE("durations, rates and sizes format compactly") {
  CHECK(Progress::format_duration(42) == "42s");
  CHECK(Progress::format_duration(185) == "3m05s");
  CHECK(Progress::format_duration(3720) == "1h02m");
  CHECK(Progress::format_rate(950) == "950");
  CHECK(Progress::format_rate(12345) == "12.3k");
  CHECK(Progress::format_rate(1.2e6) == "1.20M");
  CHECK(Progress::format_bytes(3 << 20) == "3.0 MiB");
}

TEST_CASE("progress lines every log_every steps and metrics as JSON lines") {
  const TempDir tmp;
  const std::string path = tmp.file("metrics.jsonl");
  std::ostringstream out;
  {
    Progress p({.out = &out,
                .live = false,
                .log_every = 2,
                .total_steps = 4,
                .unit = "tok",
                .metrics_path = path});
    for (int64_t s = 1; s <= 4; ++s) {
      p.step({.step = s,
              .loss = 5.0 - double(s),
              .lr = 1e-3,
              .grad_norm = 0.5,
              .seconds = 0.5,
              .units = 1000,
              .peak_bytes = 5 << 20});
    }
    p.eval(4, {{"val_loss", 1.5}}, "val loss 1.5000");
  }
  const std::string text = out.str();
  CHECK(text.find("step 1/4 | loss 4.0000 | lr 1.00e-03 | 2000 tok/s | eta 2s | mem 5.0 MiB") !=
        std::string::npos);
  CHECK(text.find("step 2/4") != std::string::npos);
  CHECK(text.find("step 3/4") == std::string::npos);  // not a multiple of log_every
  CHECK(text.find("step 4/4 | loss 1.0000") != std::string::npos);
  CHECK(text.find("eval at step 4 | val loss 1.5000") != std::string::npos);
  std::ifstream in(path);
  std::string line;
  int n = 0;
  nlohmann::json last;
  while (std::getline(in, line)) {
    last = nlohmann::json::parse(line);
    ++n;
  }
  CHECK(n == 5);
  CHECK(last["val_loss"] == 1.5);
  CHECK(last["eval"] == true);
}

TEST_CASE("metrics records carry every rank's peak when the trainer gathered it") {
  const TempDir tmp;
  const std::string path = tmp.file("metrics.jsonl");
  {
    Progress p({.log_every = 1, .total_steps = 2, .metrics_path = path});
    p.step({.step = 1, .seconds = 1.0, .peak_bytes = 300, .peak_bytes_ranks = {300, 500, 400}});
    p.step({.step = 2, .seconds = 1.0, .peak_bytes = 300});  // not gathered: left out
  }
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  const nlohmann::json first = nlohmann::json::parse(line);
  CHECK(first["peak_bytes_ranks"] == std::vector<int64_t>{300, 500, 400});
  CHECK(first["peak_bytes"] == 300);
  std::getline(in, line);
  CHECK_FALSE(nlohmann::json::parse(line).contains("peak_bytes_ranks"));
}

TEST_CASE("on a GPU the line and the metrics show that device's current and peak memory") {
  const TempDir tmp;
  const std::string path = tmp.file("metrics.jsonl");
  std::ostringstream out;
  {
    Progress p({.out = &out, .live = false, .log_every = 1, .total_steps = 2, .metrics_path = path});
    p.step({.step = 1,
            .loss = 2.0,
            .lr = 1e-3,
            .seconds = 1.0,
            .units = 100,
            .peak_bytes = int64_t(3) << 30,
            .memory_device = "cuda:1",
            .current_bytes = int64_t(3) << 29});
    p.step({.step = 2, .loss = 1.5, .lr = 1e-3, .seconds = 1.0, .units = 100, .peak_bytes = 7 << 20});
  }
  const std::string text = out.str();
  CHECK(text.find("step 1/2 | loss 2.0000 | lr 1.00e-03 | 100 tok/s | eta 1s | "
                  "mem cuda:1 1.50 GiB (peak 3.00 GiB)") != std::string::npos);
  CHECK(text.find("step 2/2 | loss 1.5000 | lr 1.00e-03 | 100 tok/s | eta 0s | mem 7.0 MiB\n") !=
        std::string::npos);  // the CPU's line is unchanged
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  const nlohmann::json first = nlohmann::json::parse(line);
  CHECK(first["memory_device"] == "cuda:1");
  CHECK(first["current_bytes"] == int64_t(3) << 29);
  CHECK(first["peak_bytes"] == int64_t(3) << 30);
  std::getline(in, line);
  CHECK_FALSE(nlohmann::json::parse(line).contains("memory_device"));
}

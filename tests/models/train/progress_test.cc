// The progress line's fields and formats, and the metrics file's JSON lines.
#include "models/train/progress.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

using namespace tessera::train;

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
  const std::string path = "/tmp/tessera_progress_test.jsonl";
  std::remove(path.c_str());
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

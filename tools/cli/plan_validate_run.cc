// Runs one of the planner's layouts for real (see plan_validate_run.h).
#include "tools/cli/plan_validate_run.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <thread>

#include "core/error.h"

extern char** environ;

namespace tessera::cli {

namespace {

using nlohmann::json;

constexpr int kLogTailLines = 15;

// The layout as `tessera train` runs it here: a short run, nothing saved, evaluated or sampled,
// every step's metrics (with every rank's peak) to `metrics`. A decaying schedule keeps the full
// run's length, so the short run needs no schedule of its own (and passes the warm-up check).
json short_run_config(const train::TrainConfig& config, const plan::Layout& layout, int steps,
                      const std::string& metrics) {
  json j = plan::layout_config(config, layout);
  if (j.contains("schedule") && j["schedule"].is_object() && !j["schedule"].contains("total_steps"))
    j["schedule"]["total_steps"] = config.train.steps;
  j["train"]["steps"] = steps;
  j["train"]["eval_every"] = 0;
  j["train"]["eval_batches"] = 0;
  j["train"]["sample_tokens"] = 0;
  j["checkpoint"]["dir"] = "";
  j["checkpoint"]["every"] = 0;
  j["logging"]["metrics"] = metrics;
  j["logging"]["log_every"] = 1;
  train::TrainConfig::from_json(j);  // refused here, with train's message, before mpirun starts
  return j;
}

std::vector<std::string> mpirun_args(const std::string& self, int world, const std::string& cfg) {
  return {"mpirun",
          "--oversubscribe",
          "--bind-to",
          "none",
          "--mca",
          "mpi_yield_when_idle",
          "1",
          "-np",
          std::to_string(world),
          self,
          "train",
          "--config",
          cfg};
}

// Runs `argv` with stdout and stderr to `log`; its exit code, or 124 after `timeout_s` (it is
// stopped: SIGTERM, which mpirun passes to its ranks, then SIGKILL).
int run_logged(const std::vector<std::string>& argv, const std::string& log, double timeout_s) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  TS_CHECK(spawned == 0, "plan validate", "cannot start ", argv[0], ": ", std::strerror(spawned),
           " (is Open MPI's mpirun on PATH?)");
  const auto start = std::chrono::steady_clock::now();
  bool stopped = false;
  for (;;) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      if (stopped) return 124;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!stopped && elapsed > timeout_s) {
      kill(pid, SIGTERM);
      stopped = true;
    } else if (stopped && elapsed > timeout_s + 10) {
      kill(pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::string log_tail(const std::string& path) {
  std::ifstream in(path);
  std::deque<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
    if (lines.size() > size_t(kLogTailLines)) lines.pop_front();
  }
  std::string text;
  for (const std::string& l : lines) text += "    " + l + "\n";
  return text;
}

std::vector<json> read_metrics(const std::string& path) {
  std::ifstream in(path);
  TS_CHECK(in.good(), "plan validate", "expected the run's metrics file ", path, ", found none");
  std::vector<json> records;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) records.push_back(json::parse(line));
  return records;
}

}  // namespace

LayoutRun run_layout(const train::TrainConfig& config, const plan::Prediction& p, size_t plan_rank,
                     const RunOptions& a) {
  LayoutRun run;
  run.plan_rank = plan_rank;
  run.predicted = p;
  run.text = plan::layout_text(p.layout);
  const std::string stem = "layout-" + std::to_string(plan_rank + 1);
  const std::string cfg = (a.dir / (stem + ".json")).string(),
                    log = (a.dir / (stem + ".log")).string(),
                    metrics = (a.dir / (stem + ".jsonl")).string();
  const auto start = std::chrono::steady_clock::now();
  try {
    std::ofstream(cfg) << short_run_config(config, p.layout, a.steps, metrics).dump(2) << "\n";
    const int rc = run_logged(mpirun_args(a.self, a.world, cfg), log, a.timeout_s);
    if (rc != 0) {
      run.failure =
          (rc == 124 ? "stopped after --timeout " + std::to_string(int(a.timeout_s)) + " s"
                     : "exit " + std::to_string(rc)) +
          "; the end of its log (" + log + "):\n" + log_tail(log);
    } else {
      run.measured = plan::measure_run(read_metrics(metrics), kWarmupSteps);
      run.ok = true;
    }
  } catch (const std::exception& e) {
    run.failure = train::error_text(e);
  }
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (getloadavg(&run.load_average, 1) != 1) run.load_average = -1;
  return run;
}

}  // namespace tessera::cli

// `tessera plan validate`: the planner's error, measured. Trains the planner's best layouts and a
// seeded sample of the rest for a few steps each, for real (`mpirun -np N tessera train`), and
// prints predicted against measured step time and peak memory, with the summary the issue's bar
// is stated in (mean and worst error, Kendall tau, the chosen layout's distance from the best).
// The arithmetic lives in models/plan/validation.h; this file runs the jobs and prints.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <thread>

#include "core/error.h"
#include "models/plan/plan.h"
#include "models/plan/validation.h"
#include "models/train/train_config.h"
#include "tools/cli/commands.h"
#include "tools/cli/plan_validate_run.h"

namespace tessera::cli {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const char* const kValidateUsage =
    "usage: tessera plan validate --config FILE --world N [--layouts K] [--steps S]\n"
    "                             [--cluster C] [--seed X] [--json] [--out DIR]\n"
    "                             [--timeout SECONDS] [--set key=value ...]\n"
    "  Trains the planner's best ceil(K/2) feasible layouts of N ranks and a sample of the rest\n"
    "  (drawn with --seed) to make K (default 12), S steps each (default 8) under\n"
    "  `mpirun -np N --oversubscribe`, and prints predicted against measured step time (the\n"
    "  median after 2 warm-up steps) and peak memory (the largest rank's), the mean and worst\n"
    "  absolute percentage errors, Kendall's tau-b of the step times and how far the planner's\n"
    "  choice is from the measured best.\n"
    "  --cluster C        the planner's profile (default host)\n"
    "  --json             one JSON object: every run and the summary\n"
    "  --out DIR          keep every run's config, log and metrics under DIR (default: a "
    "temporary\n"
    "                     directory, removed at the end)\n"
    "  --timeout SECONDS  a run taking longer is stopped and reported as failed (default 900)\n"
    "  --set KEY=VALUE    override a key of the config before planning\n";

struct ValidateArgs {
  PlanJob job;
  int layouts = 12;
  int steps = 8;
  uint64_t seed = 1;
  bool json = false;
  std::string out_dir;
  double timeout_s = 900;
  bool help = false;
};

ValidateArgs parse(const std::vector<std::string>& args) {
  ValidateArgs a;
  ArgReader r(args, "plan validate");
  while (r.next()) {
    const std::string& n = r.name();
    if (r.help())
      a.help = true;
    else if (r.plan_job(a.job))
      continue;
    else if (n == "--layouts")
      a.layouts = int(ArgReader::to_int(n, r.value()));
    else if (n == "--steps")
      a.steps = int(ArgReader::to_int(n, r.value()));
    else if (n == "--seed")
      a.seed = uint64_t(ArgReader::to_int(n, r.value()));
    else if (n == "--json")
      a.json = true;
    else if (n == "--out")
      a.out_dir = r.value();
    else if (n == "--timeout")
      a.timeout_s = ArgReader::to_double(n, r.value());
    else
      r.unknown();
  }
  if (a.help) return a;
  ArgReader::check_plan_job(a.job, "plan validate");
  TS_CHECK(a.layouts >= 1, "plan validate", "expected --layouts K >= 1, got ", a.layouts);
  TS_CHECK(a.steps > kWarmupSteps, "plan validate", "expected --steps above the ", kWarmupSteps,
           " warm-up steps the median leaves out, got ", a.steps);
  TS_CHECK(a.timeout_s > 0, "plan validate", "expected --timeout > 0 seconds, got ", a.timeout_s);
  return a;
}

std::string mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MiB", double(bytes) / double(1 << 20));
  return buf;
}

// Signed percent: which way the planner errs.
std::string pct(double relative) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", relative * 100);
  return buf;
}

// Every rank's peak against its prediction: the worst absolute error (percent) and its rank;
// {-1, -1} when the prediction lists another number of ranks (nothing to compare rank by rank).
std::pair<double, int> worst_rank_error(const LayoutRun& r) {
  const std::vector<int64_t> p = r.predicted.peak_bytes_ranks();
  const std::vector<int64_t>& m = r.measured.peak_bytes_ranks;
  if (p.size() != m.size()) return {-1, -1};
  std::pair<double, int> worst{0, 0};
  for (size_t i = 0; i < p.size(); ++i) {
    const double e = std::abs(plan::relative_error(double(p[i]), double(m[i]))) * 100;
    if (e > worst.first) worst = {e, int(i)};
  }
  return worst;
}

json nan_to_null(double v) { return std::isnan(v) ? json(nullptr) : json(v); }

json run_json(const LayoutRun& r) {
  json j = {{"plan_rank", r.plan_rank + 1},
            {"layout_text", r.text},
            {"layout", r.predicted.to_json()["layout"]},
            {"ok", r.ok},
            {"failure", r.ok ? json(nullptr) : json(r.failure)},
            {"run_seconds", r.seconds},
            {"load_average", r.load_average},
            {"predicted",
             {{"step_seconds", r.predicted.step_seconds},
              {"peak_bytes", r.predicted.peak_bytes},
              {"peak_rank", r.predicted.peak_rank},
              {"peak_bytes_ranks", r.predicted.peak_bytes_ranks()}}}};
  if (!r.ok) return j;
  j["measured"] = {{"step_seconds", r.measured.step_seconds},
                   {"steps_used", r.measured.steps_used},
                   {"peak_bytes", r.measured.peak_bytes},
                   {"peak_rank", r.measured.peak_rank},
                   {"peak_bytes_ranks", r.measured.peak_bytes_ranks}};
  j["step_error_pct"] =
      plan::relative_error(r.predicted.step_seconds, r.measured.step_seconds) * 100;
  j["peak_error_pct"] =
      plan::relative_error(double(r.predicted.peak_bytes), double(r.measured.peak_bytes)) * 100;
  const auto [worst, rank] = worst_rank_error(r);
  j["peak_worst_rank_error_pct"] = worst < 0 ? json(nullptr) : json(worst);
  j["peak_worst_rank"] = worst < 0 ? json(nullptr) : json(rank);
  return j;
}

// The summary over the successful runs; `ok` maps its indices back to `runs`.
json summary_json(const std::vector<LayoutRun>& runs, const std::vector<size_t>& ok,
                  const plan::ValidationSummary& s) {
  double worst_rank = -1;  // stays -1 when no run's prediction lists every rank
  for (size_t i : ok) worst_rank = std::max(worst_rank, worst_rank_error(runs[i]).first);
  return {{"runs", runs.size()},
          {"succeeded", ok.size()},
          {"failed", runs.size() - ok.size()},
          {"step_time_mape_pct", s.step_time.mean_pct},
          {"step_time_worst_ape_pct", s.step_time.worst_pct},
          {"peak_mape_pct", s.peak_memory.mean_pct},
          {"peak_worst_ape_pct", s.peak_memory.worst_pct},
          {"peak_every_rank_worst_ape_pct", worst_rank < 0 ? json(nullptr) : json(worst_rank)},
          {"kendall_tau", nan_to_null(s.kendall_tau)},
          {"chosen_plan_rank", runs[ok[s.chosen]].plan_rank + 1},
          {"measured_best_plan_rank", runs[ok[s.measured_best]].plan_rank + 1},
          {"chosen_regret_pct", s.chosen_regret * 100}};
}

void print_table(const std::vector<LayoutRun>& runs, std::ostream& os) {
  char buf[400];
  std::snprintf(buf, sizeof buf, "%5s  %-44s %10s %10s %8s  %12s %12s %8s\n", "plan", "layout",
                "pred ms", "meas ms", "error", "pred peak", "meas peak", "error");
  os << buf;
  for (const LayoutRun& r : runs) {
    if (!r.ok) {
      std::snprintf(buf, sizeof buf, "%5zu  %-44s %10.2f %10s\n", r.plan_rank + 1, r.text.c_str(),
                    r.predicted.step_seconds * 1e3, "FAILED");
      os << buf;
      continue;
    }
    std::snprintf(
        buf, sizeof buf, "%5zu  %-44s %10.2f %10.2f %8s  %12s %12s %8s\n", r.plan_rank + 1,
        r.text.c_str(), r.predicted.step_seconds * 1e3, r.measured.step_seconds * 1e3,
        pct(plan::relative_error(r.predicted.step_seconds, r.measured.step_seconds)).c_str(),
        mib(r.predicted.peak_bytes).c_str(), mib(r.measured.peak_bytes).c_str(),
        pct(plan::relative_error(double(r.predicted.peak_bytes), double(r.measured.peak_bytes)))
            .c_str());
    os << buf;
  }
}

void print_summary(const json& s, std::ostream& os) {
  char buf[400];
  std::snprintf(buf, sizeof buf,
                "step time: mean absolute error %.1f%%, worst %.1f%% over %d runs (%d failed)\n",
                s["step_time_mape_pct"].get<double>(), s["step_time_worst_ape_pct"].get<double>(),
                s["succeeded"].get<int>(), s["failed"].get<int>());
  os << buf;
  std::snprintf(buf, sizeof buf,
                "peak memory (largest rank): mean absolute error %.1f%%, worst %.1f%%",
                s["peak_mape_pct"].get<double>(), s["peak_worst_ape_pct"].get<double>());
  os << buf;
  const json& every = s["peak_every_rank_worst_ape_pct"];
  if (!every.is_null()) {
    std::snprintf(buf, sizeof buf, "; every rank: worst %.1f%%", every.get<double>());
    os << buf;
  }
  os << "\n";
  if (s["kendall_tau"].is_null())
    std::snprintf(buf, sizeof buf, "Kendall tau-b of the step times: undefined (%s)\n",
                  "fewer than 2 runs, or all predictions or measurements equal");
  else
    std::snprintf(buf, sizeof buf, "Kendall tau-b of predicted and measured step times: %.3f\n",
                  s["kendall_tau"].get<double>());
  os << buf;
  std::snprintf(buf, sizeof buf,
                "chosen layout (plan #%d, the fastest predicted among the runs) vs the measured "
                "best (plan #%d): %.1f%% slower\n",
                s["chosen_plan_rank"].get<int>(), s["measured_best_plan_rank"].get<int>(),
                s["chosen_regret_pct"].get<double>());
  os << buf;
}

// The host's load as the runs ended, beside its cores: measured times on a busy host are slower
// than the planner's profile of it, and that is not the planner's error.
void print_load(const std::vector<LayoutRun>& runs, std::ostream& os) {
  if (runs.empty()) return;
  double low = runs[0].load_average, high = 0;
  for (const LayoutRun& r : runs) {
    if (r.load_average < 0) return;  // unknown
    low = std::min(low, r.load_average);
    high = std::max(high, r.load_average);
  }
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "host load average (1 min) as the runs ended: %.1f to %.1f, on %u cores\n", low,
                high, std::thread::hardware_concurrency());
  os << buf;
}

// A fresh directory for the runs' files: --out, or a temporary one (removed by the caller).
fs::path runs_dir(const std::string& out_dir) {
  if (!out_dir.empty()) {
    fs::create_directories(out_dir);
    return fs::absolute(out_dir);
  }
  std::string pattern = (fs::temp_directory_path() / "tessera-validate.XXXXXX").string();
  TS_CHECK(mkdtemp(pattern.data()) != nullptr, "plan validate",
           "cannot create a temporary directory like ", pattern, ": ", std::strerror(errno));
  return pattern;
}

int validate(const ValidateArgs& a, const std::string& self) {
  const train::TrainConfig config = train::load_train_config(a.job.config, a.job.sets);
  const plan::ClusterProfile cluster = plan::load_cluster(a.job.cluster, a.job.world);
  std::vector<plan::Prediction> feasible;
  for (plan::Prediction& p : plan::search(config, a.job.world, cluster, {.include_infeasible = false}))
    if (p.feasible) feasible.push_back(std::move(p));
  TS_CHECK(!feasible.empty(), "plan validate", "expected a feasible layout of ", a.job.config, " on ",
           a.job.world, " ranks, got none (see tessera plan --search)");
  const std::vector<size_t> chosen =
      plan::choose_layouts(feasible.size(), size_t(a.layouts), a.seed);
  const fs::path dir = runs_dir(a.out_dir);
  std::cerr << "tessera plan validate: " << a.job.config << " on " << a.job.world << " ranks, cluster "
            << cluster.name << ": " << chosen.size() << " of " << feasible.size()
            << " feasible layouts, " << a.steps << " steps each, in " << dir.string() << "\n";
  if (const char* threads = std::getenv("TESSERA_NUM_THREADS"))
    std::cerr << "  note: TESSERA_NUM_THREADS=" << threads
              << " in the environment sets every run's threads per rank\n";
  // mpirun starts ranks in this directory, so a relative path to this binary stays right; a bare
  // name was found on PATH and mpirun finds it there too.
  const RunOptions options{
      .self = self.find('/') == std::string::npos ? self : fs::absolute(self).string(),
      .world = a.job.world,
      .steps = a.steps,
      .timeout_s = a.timeout_s,
      .dir = dir};
  std::vector<LayoutRun> runs;
  for (size_t i : chosen) {
    runs.push_back(run_layout(config, feasible[i], i, options));
    const LayoutRun& r = runs.back();
    std::cerr << "  [" << runs.size() << "/" << chosen.size() << "] plan #" << i + 1 << " "
              << r.text << ": " << (r.ok ? "ok" : "FAILED") << " ("
              << std::lround(r.seconds * 10) / 10.0 << " s)\n";
  }
  const bool all_ok =
      std::all_of(runs.begin(), runs.end(), [](const LayoutRun& r) { return r.ok; });
  // A temporary directory goes unless a run failed: then its log stays for a look.
  if (a.out_dir.empty() && all_ok) fs::remove_all(dir);

  std::vector<size_t> ok;
  std::vector<plan::Comparison> comparisons;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!runs[i].ok) continue;
    ok.push_back(i);
    comparisons.push_back({.predicted_seconds = runs[i].predicted.step_seconds,
                           .measured_seconds = runs[i].measured.step_seconds,
                           .predicted_peak = runs[i].predicted.peak_bytes,
                           .measured_peak = runs[i].measured.peak_bytes});
  }
  const json summary =
      ok.empty() ? json(nullptr) : summary_json(runs, ok, plan::summarize(comparisons));
  if (a.json) {
    json out = {{"config", a.job.config},
                {"world", a.job.world},
                {"cluster", cluster.name},
                {"steps", a.steps},
                {"warmup_steps", kWarmupSteps},
                {"seed", a.seed},
                {"feasible_layouts", feasible.size()},
                {"runs", json::array()},
                {"summary", summary}};
    for (const LayoutRun& r : runs) out["runs"].push_back(run_json(r));
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << "tessera plan validate: " << a.job.config << " on " << a.job.world << " ranks (cluster "
              << cluster.name << "), " << runs.size() << " of " << feasible.size()
              << " feasible layouts, step time the median of steps " << kWarmupSteps + 1 << "-"
              << a.steps << "\n";
    print_table(runs, std::cout);
    for (const LayoutRun& r : runs)
      if (!r.ok)
        std::cout << "plan #" << r.plan_rank + 1 << " " << r.text << " failed: " << r.failure
                  << "\n";
    if (summary.is_null())
      std::cout << "no run succeeded: nothing to compare\n";
    else
      print_summary(summary, std::cout);
    print_load(runs, std::cout);
  }
  // A layout the planner calls feasible that does not train is the planner's error too.
  return all_ok ? 0 : 1;
}

}  // namespace

int run_plan_validate(const std::string& self, const std::vector<std::string>& args) {
  try {
    const ValidateArgs a = parse(args);
    if (a.help) {
      std::cout << kValidateUsage;
      return 0;
    }
    return validate(a, self);
  } catch (const std::exception& e) {
    std::cerr << "tessera plan validate: " << train::error_text(e) << "\n";
    return 2;
  }
}

}  // namespace tessera::cli

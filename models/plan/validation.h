// The arithmetic of `tessera plan validate`: which of the planner's layouts to run, what a run's
// metrics file measured, and how far the predictions were from the measurements (percentage
// errors, Kendall's rank correlation, the chosen layout's distance from the measured best). Pure
// functions: the runs themselves happen in tools/cli/plan_validate.cc.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/plan/plan.h"

namespace tessera::plan {

// "dp2 tp2(1d) pp1 zero1 mb4": the axes a search varies, in one line. Options show only where
// they matter: the pipeline's schedule (and virtual stages) when pp > 1, the sequence axis and its
// attention mode when sp > 1, 2.5D's depth, Megatron's sequence parallelism ("1d+sp"), ZeRO's
// offload ("+offload", "+params") and whole-block recompute ("ckpt").
std::string layout_text(const Layout& layout);

// Which of `feasible` layouts (ranked best first by the planner) to run, as ascending indices:
// the best ceil(k / 2), then a sample drawn with `seed` from the rest to make k (all of them when
// there are no more than k). The draw is our own generator's, so a seed picks the same layouts on
// every platform.
std::vector<size_t> choose_layouts(size_t feasible, size_t k, uint64_t seed);

// The middle value (the mean of the two middle ones for an even count). Throws ValueError on none.
double median(std::vector<double> values);

// predicted / measured - 1: signed, so a table shows which way the planner errs. Throws ValueError
// unless measured > 0.
double relative_error(double predicted, double measured);

// Mean and largest absolute percentage error (percent) over matched pairs.
struct ErrorStats {
  double mean_pct = 0;
  double worst_pct = 0;
};
ErrorStats absolute_percentage_errors(const std::vector<double>& predicted,
                                      const std::vector<double>& measured);

// Kendall's tau-b of two equally long series: (concordant - discordant) pairs over the geometric
// mean of the pairs untied in each series, so ties count as neither. NaN when it is undefined
// (fewer than 2 values, or one series all tied).
double kendall_tau_b(const std::vector<double>& x, const std::vector<double>& y);

// What one short `tessera train` run measured, from its metrics file's JSON records.
struct Measurement {
  double step_seconds = 0;  // the median over the step records after the warm-up
  int steps_used = 0;       // how many records that median is over
  int64_t peak_bytes = 0;   // the largest of the last record's peak_bytes_ranks
  int peak_rank = 0;
  std::vector<int64_t> peak_bytes_ranks;  // the last record's, by world rank
};
// Step records are those with step_seconds (evaluation records are not); those of steps
// <= warmup_steps are dropped, since the first steps allocate, fault pages in and (ZeRO-3's
// auto placement) trace. Throws ValueError naming what is missing: no step after the warm-up, or
// a last record without peak_bytes_ranks.
Measurement measure_run(const std::vector<nlohmann::json>& records, int warmup_steps);

// One layout's prediction beside its measurement.
struct Comparison {
  double predicted_seconds = 0;
  double measured_seconds = 0;
  int64_t predicted_peak = 0;  // the largest over ranks, both
  int64_t measured_peak = 0;
};

struct ValidationSummary {
  int runs = 0;
  ErrorStats step_time;
  ErrorStats peak_memory;
  double kendall_tau = 0;  // predicted against measured step times (NaN: undefined)
  // The planner's choice among the runs (its fastest prediction, the first on a tie) and the
  // measured fastest, as indices into the comparisons; regret = measured time of the chosen one
  // over the measured best's, minus 1 (0 when the planner chose the measured best).
  size_t chosen = 0;
  size_t measured_best = 0;
  double chosen_regret = 0;
};
// Throws ValueError on no comparisons.
ValidationSummary summarize(const std::vector<Comparison>& runs);

}  // namespace tessera::plan

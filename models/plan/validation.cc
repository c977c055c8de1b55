// The arithmetic of `tessera plan validate` (see validation.h).
#include "models/plan/validation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"
#include "parallel/mesh/tensor_mode.h"
#include "parallel/pipeline/schedule.h"
#include "parallel/sequence/modes.h"

namespace tessera::plan {

namespace {

// splitmix64: a tiny generator whose output is fixed by its definition, unlike the standard
// distributions, whose draws differ between library implementations.
class SplitMix {
 public:
  explicit SplitMix(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n), n > 0: draws above the largest multiple of n are rejected (no modulo bias).
  uint64_t below(uint64_t n) {
    const uint64_t limit = std::numeric_limits<uint64_t>::max() / n * n;
    uint64_t x = next();
    while (x >= limit) x = next();
    return x % n;
  }

 private:
  uint64_t state_;
};

int sign(double v) { return (v > 0) - (v < 0); }

}  // namespace

std::string layout_text(const Layout& layout) {
  const parallel::ParallelConfig& p = layout.parallel;
  std::string text = "dp" + std::to_string(p.data) + " tp" + std::to_string(p.tensor.size);
  if (p.tensor.size > 1) {
    text += "(" + std::string(parallel::tensor_mode_name(p.tensor.mode));
    if (p.tensor.mode == parallel::TensorMode::two_point_five_d)
      text += " d" + std::to_string(p.tensor.depth);
    if (p.tensor.sequence_parallel) text += "+sp";
    text += ")";
  }
  text += " pp" + std::to_string(p.pipeline);
  if (p.pipeline > 1) {
    text += "(" + std::string(parallel::pipeline::schedule_name(p.pipeline_options.schedule));
    if (p.pipeline_options.virtual_stages > 1)
      text += " v" + std::to_string(p.pipeline_options.virtual_stages);
    text += ")";
  }
  if (p.sequence > 1)
    text += " sp" + std::to_string(p.sequence) + "(" +
            parallel::sequence::mode_name(p.sequence_mode) + ")";
  text += " zero" + std::to_string(layout.zero.stage);
  if (layout.zero.offload) text += "+offload";
  if (layout.zero.offload_params) text += "+params";
  text += " mb" + std::to_string(layout.micro_batch_size);
  if (layout.checkpoint) text += " ckpt";
  return text;
}

std::vector<size_t> choose_layouts(size_t feasible, size_t k, uint64_t seed) {
  std::vector<size_t> chosen(std::min(feasible, (k + 1) / 2));
  std::iota(chosen.begin(), chosen.end(), size_t(0));
  std::vector<size_t> rest(feasible - chosen.size());
  std::iota(rest.begin(), rest.end(), chosen.size());
  // A partial Fisher-Yates shuffle: the first `take` of `rest` become a uniform sample.
  const size_t take = std::min(rest.size(), k - chosen.size());
  SplitMix gen(seed);
  for (size_t i = 0; i < take; ++i) std::swap(rest[i], rest[i + gen.below(rest.size() - i)]);
  chosen.insert(chosen.end(), rest.begin(), rest.begin() + ptrdiff_t(take));
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

double median(std::vector<double> values) {
  TS_CHECK(!values.empty(), "plan validate", "median: expected at least one value, got none");
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + ptrdiff_t(mid), values.end());
  if (values.size() % 2 == 1) return values[mid];
  const double upper = values[mid];
  const double lower = *std::max_element(values.begin(), values.begin() + ptrdiff_t(mid));
  return (lower + upper) / 2;
}

double relative_error(double predicted, double measured) {
  TS_CHECK(measured > 0, "plan validate", "expected a positive measurement, got ", measured);
  return predicted / measured - 1;
}

ErrorStats absolute_percentage_errors(const std::vector<double>& predicted,
                                      const std::vector<double>& measured) {
  TS_CHECK(predicted.size() == measured.size() && !predicted.empty(), "plan validate",
           "expected as many predictions as measurements (at least one), got ", predicted.size(),
           " and ", measured.size());
  ErrorStats stats;
  for (size_t i = 0; i < predicted.size(); ++i) {
    const double ape = std::abs(relative_error(predicted[i], measured[i])) * 100;
    stats.mean_pct += ape / double(predicted.size());
    stats.worst_pct = std::max(stats.worst_pct, ape);
  }
  return stats;
}

double kendall_tau_b(const std::vector<double>& x, const std::vector<double>& y) {
  TS_CHECK(x.size() == y.size(), "plan validate",
           "Kendall tau: expected two series of one length, ", "got ", x.size(), " and ", y.size());
  // O(n^2) over pairs: a validation runs tens of layouts, not thousands.
  int64_t concordant = 0, discordant = 0, untied_x = 0, untied_y = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    for (size_t j = i + 1; j < x.size(); ++j) {
      const int sx = sign(x[j] - x[i]), sy = sign(y[j] - y[i]);
      untied_x += sx != 0;
      untied_y += sy != 0;
      concordant += sx * sy > 0;
      discordant += sx * sy < 0;
    }
  }
  if (untied_x == 0 || untied_y == 0) return std::numeric_limits<double>::quiet_NaN();
  return double(concordant - discordant) / std::sqrt(double(untied_x) * double(untied_y));
}

Measurement measure_run(const std::vector<nlohmann::json>& records, int warmup_steps) {
  std::vector<double> seconds;
  const nlohmann::json* last = nullptr;
  int steps = 0;
  for (const nlohmann::json& r : records) {
    if (!r.is_object() || !r.contains("step_seconds")) continue;  // an evaluation's record
    ++steps;
    last = &r;
    if (r.at("step").get<int64_t>() > warmup_steps) seconds.push_back(r.at("step_seconds"));
  }
  TS_CHECK(!seconds.empty(), "plan validate", "expected step records after the first ",
           warmup_steps, " (warm-up) steps in the metrics file, got ", steps,
           " step records: run more steps (--steps)");
  TS_CHECK(last->contains("peak_bytes_ranks"), "plan validate",
           "expected peak_bytes_ranks in the metrics record of step ", last->at("step").dump(),
           ", got the keys of ", last->dump());
  Measurement m;
  m.step_seconds = median(seconds);
  m.steps_used = int(seconds.size());
  m.peak_bytes_ranks = last->at("peak_bytes_ranks").get<std::vector<int64_t>>();
  TS_CHECK(!m.peak_bytes_ranks.empty() &&
               *std::min_element(m.peak_bytes_ranks.begin(), m.peak_bytes_ranks.end()) > 0,
           "plan validate", "expected a positive peak per rank in peak_bytes_ranks, got ",
           last->at("peak_bytes_ranks").dump());
  const auto peak = std::max_element(m.peak_bytes_ranks.begin(), m.peak_bytes_ranks.end());
  m.peak_bytes = *peak;
  m.peak_rank = int(peak - m.peak_bytes_ranks.begin());
  return m;
}

ValidationSummary summarize(const std::vector<Comparison>& runs) {
  TS_CHECK(!runs.empty(), "plan validate", "expected at least one successful run to summarize");
  std::vector<double> predicted_s, measured_s, predicted_peak, measured_peak;
  for (const Comparison& c : runs) {
    predicted_s.push_back(c.predicted_seconds);
    measured_s.push_back(c.measured_seconds);
    predicted_peak.push_back(double(c.predicted_peak));
    measured_peak.push_back(double(c.measured_peak));
  }
  ValidationSummary s;
  s.runs = int(runs.size());
  s.step_time = absolute_percentage_errors(predicted_s, measured_s);
  s.peak_memory = absolute_percentage_errors(predicted_peak, measured_peak);
  s.kendall_tau = kendall_tau_b(predicted_s, measured_s);
  // min_element keeps the first of equal values: the planner's own order breaks its ties.
  s.chosen = size_t(std::min_element(predicted_s.begin(), predicted_s.end()) - predicted_s.begin());
  s.measured_best =
      size_t(std::min_element(measured_s.begin(), measured_s.end()) - measured_s.begin());
  s.chosen_regret = measured_s[s.chosen] / measured_s[s.measured_best] - 1;
  return s;
}

}  // namespace tessera::plan

// `bench pp`'s step summaries (see pp_plan.h).
#include "tools/bench/pp_plan.h"

#include <algorithm>

#include "core/error.h"

namespace tessera::bench {

using parallel::pipeline::ActionType;

int compute_kind(ActionType type) {
  switch (type) {
    case ActionType::forward:
      return int(ComputeKind::forward);
    case ActionType::backward:
      return int(ComputeKind::backward);
    case ActionType::backward_input:
      return int(ComputeKind::backward_input);
    case ActionType::backward_weight:
      return int(ComputeKind::backward_weight);
    default:
      return -1;
  }
}

double StepRecord::busy() const {
  double total = 0;
  for (double s : seconds) total += s;
  return total;
}

void add_action(StepRecord& record, ActionType type, double seconds) {
  const int kind = compute_kind(type);
  if (kind < 0) return;
  record.seconds[size_t(kind)] += seconds;
  record.actions[size_t(kind)] += 1;
}

double median(std::vector<double> values) {
  TS_CHECK(!values.empty(), "bench pp", "expected at least one value for a median");
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

PpSummary summarize(const std::vector<std::vector<StepRecord>>& records) {
  TS_CHECK(!records.empty() && !records[0].empty(), "bench pp",
           "expected at least one rank and one step, got ", records.size(), " ranks");
  const size_t ranks = records.size(), steps = records[0].size();
  for (size_t r = 0; r < ranks; ++r) {
    TS_CHECK(records[r].size() == steps, "bench pp", "expected ", steps,
             " steps on every rank, got ", records[r].size(), " on rank ", r);
  }
  PpSummary s;
  std::vector<double> step_times, means, maxima;
  std::array<double, kNumComputeKinds> seconds{};
  std::array<int64_t, kNumComputeKinds> actions{};
  s.activation_bytes.assign(ranks, 0);
  for (size_t i = 0; i < steps; ++i) {
    double step = 0;
    for (size_t r = 0; r < ranks; ++r) step = std::max(step, records[r][i].wall);
    double sum = 0, most = 0;
    for (size_t r = 0; r < ranks; ++r) {
      const StepRecord& rec = records[r][i];
      const double idle = step > 0 ? 1.0 - rec.busy() / step : 0.0;
      sum += idle;
      most = std::max(most, idle);
      for (int k = 0; k < kNumComputeKinds; ++k) {
        seconds[size_t(k)] += rec.seconds[size_t(k)];
        actions[size_t(k)] += rec.actions[size_t(k)];
      }
      s.activation_bytes[r] = std::max(s.activation_bytes[r], rec.activation_bytes);
    }
    step_times.push_back(step);
    means.push_back(sum / double(ranks));
    maxima.push_back(most);
  }
  s.step_seconds = median(step_times);
  s.bubble_mean = median(means);
  s.bubble_max = median(maxima);
  const auto mean_of = [&](ComputeKind k) {
    const size_t i = size_t(k);
    return actions[i] > 0 ? seconds[i] / double(actions[i]) : 0.0;
  };
  s.costs.forward = mean_of(ComputeKind::forward);
  s.costs.backward = mean_of(ComputeKind::backward);
  s.costs.backward_input = mean_of(ComputeKind::backward_input);
  s.costs.backward_weight = mean_of(ComputeKind::backward_weight);
  return s;
}

}  // namespace tessera::bench

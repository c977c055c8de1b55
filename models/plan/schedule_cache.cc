// Memoized schedule simulations (see schedule_cache.h).
#include "models/plan/schedule_cache.h"

#include <cmath>
#include <map>
#include <mutex>
#include <tuple>

namespace tessera::plan {
namespace {

using Key = std::tuple<int, int, int, int, int64_t, int64_t, int64_t>;

int64_t ratio(double cost, double unit) { return std::llround(100.0 * cost / unit); }

}  // namespace

parallel::pipeline::SimulationResult simulated(const parallel::pipeline::ScheduleSpec& spec,
                                               const parallel::pipeline::SimulationCosts& costs) {
  static std::mutex mutex;
  static std::map<Key, parallel::pipeline::SimulationResult> cache;
  const double unit = costs.forward > 0 ? costs.forward : 1.0;
  const Key key{int(spec.kind),
                spec.stages,
                spec.virtual_stages,
                spec.micro_batches,
                ratio(costs.backward, unit),
                ratio(costs.backward_input, unit),
                ratio(costs.backward_weight, unit)};
  parallel::pipeline::SimulationResult result;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(key);
    if (it == cache.end()) {
      const parallel::pipeline::SimulationCosts normalized{
          1.0, double(std::get<4>(key)) / 100.0, double(std::get<5>(key)) / 100.0,
          double(std::get<6>(key)) / 100.0};
      it = cache.emplace(key, parallel::pipeline::simulate(spec, normalized)).first;
    }
    result = it->second;
  }
  // Back to seconds: the times scale with the forward's cost; fractions and counts do not.
  result.makespan *= unit;
  for (double& b : result.busy) b *= unit;
  return result;
}

const std::vector<HeldChunks>& held_chunks(const parallel::pipeline::ScheduleSpec& spec) {
  using parallel::pipeline::ActionType;
  static std::mutex mutex;
  static std::map<std::tuple<int, int, int, int>, std::vector<HeldChunks>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_tuple(int(spec.kind), spec.stages, spec.virtual_stages,
                                   spec.micro_batches);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  std::vector<HeldChunks> out(size_t(spec.stages));
  for (int rank = 0; rank < spec.stages; ++rank) {
    HeldChunks& h = out[size_t(rank)];
    int forwarded = 0, pending = 0, backwards = 0;
    for (const parallel::pipeline::Action& a : parallel::pipeline::schedule_actions(spec, rank)) {
      const bool backward =
          a.type == ActionType::backward || a.type == ActionType::backward_input;
      if (backward && backwards++ > 0) h.in_flight_later = std::max(h.in_flight_later, forwarded);
      if (a.type == ActionType::forward) ++forwarded;
      if (a.type == ActionType::backward) --forwarded;
      if (a.type == ActionType::backward_input) --forwarded, ++pending;
      if (a.type == ActionType::backward_weight) --pending;
      if (forwarded > h.in_flight) h.in_flight = forwarded, h.deferred_then = pending;
      if (pending > h.deferred) h.deferred = pending, h.in_flight_then = forwarded;
    }
  }
  return cache.emplace(key, std::move(out)).first->second;
}

PipelineTime pipeline_time(const parallel::pipeline::ScheduleSpec& spec,
                           const parallel::pipeline::SimulationCosts& costs) {
  using parallel::pipeline::ScheduleKind;
  const double slots = double(spec.virtual_stages) * spec.micro_batches;  // per rank
  if (spec.kind != ScheduleKind::zero_bubble) {
    const double makespan = (slots + spec.stages - 1) * (costs.forward + costs.backward);
    return {makespan, double(spec.stages - 1) / (slots + spec.stages - 1)};
  }
  const parallel::pipeline::SimulationResult sim = simulated(spec, costs);
  double idle = 0;
  for (double b : sim.bubble_fraction) idle += b;
  return {sim.makespan, idle / double(sim.bubble_fraction.size())};
}

}  // namespace tessera::plan

// The pipeline schedule simulator (parallel/pipeline/schedule.h) for the planner, memoized: a
// search asks it about the same schedules thousands of times. Costs enter normalized by the
// forward's (a schedule's times scale with its costs), the ratios rounded to 1%.
#pragma once

#include <vector>

#include "parallel/pipeline/schedule.h"

namespace tessera::plan {

// simulate(spec, costs), computed once per (spec, cost ratios); thread-safe.
parallel::pipeline::SimulationResult simulated(const parallel::pipeline::ScheduleSpec& spec,
                                               const parallel::pipeline::SimulationCosts& costs);

// One step of a schedule whose actions cost the same on every rank (chunk costs under
// interleaving): its makespan and mean idle fraction. Closed forms where the simulator is known to
// give them, (M + P - 1)(F + B) for gpipe and 1f1b and (vM + P - 1)(F + B) over chunk costs for
// interleaved (tests/models/plan/schedule_cache_test.cc holds them to the simulator); the
// memoized simulator for zero_bubble, whose W fills the bubbles.
struct PipelineTime {
  double makespan = 0;
  double bubble = 0;
};
PipelineTime pipeline_time(const parallel::pipeline::ScheduleSpec& spec,
                           const parallel::pipeline::SimulationCosts& chunk_costs);

// What one pipeline rank holds over its step's actions, at two moments: the most micro-batch
// chunks forwarded and not yet backward (with the deferred weight-gradient passes pending then),
// and the most pending W passes (zero bubble's: a chunk whose B ran and whose W has not, holding
// its linears' inputs and output gradients), with the chunks in flight then. Memoized per
// schedule; thread-safe.
struct HeldChunks {
  int in_flight = 0, deferred_then = 0;
  int deferred = 0, in_flight_then = 0;
  // The most chunks in flight when a backward other than the step's first starts (its
  // gradients then accumulate onto the ones held).
  int in_flight_later = 0;
};
const std::vector<HeldChunks>& held_chunks(const parallel::pipeline::ScheduleSpec& spec);

}  // namespace tessera::plan

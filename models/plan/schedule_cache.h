// The pipeline schedule simulator (parallel/pipeline/schedule.h) for the planner, memoized: a
// search asks it about the same schedules thousands of times. Costs enter normalized by the
// forward's (a schedule's times scale with its costs), the ratios rounded to 1%.
#pragma once

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

}  // namespace tessera::plan

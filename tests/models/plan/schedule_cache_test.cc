// The planner's pipeline times against the schedule simulator they stand in for.
#include <catch2/catch.hpp>

#include "models/plan/schedule_cache.h"

using namespace tessera;
using parallel::pipeline::ScheduleKind;

TEST_CASE("closed-form pipeline times equal the simulator's", "[plan]") {
  for (ScheduleKind kind : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b,
                            ScheduleKind::interleaved, ScheduleKind::zero_bubble}) {
    for (int p : {2, 4, 8}) {
      for (int m : {8, 16, 24}) {
        for (double b : {1.0, 2.0, 3.3}) {
          const int v = kind == ScheduleKind::interleaved ? 2 : 1;
          const parallel::pipeline::ScheduleSpec spec{kind, p, v, m};
          const parallel::pipeline::SimulationCosts costs{0.7, 0.7 * b, 0.35 * b, 0.35 * b};
          const parallel::pipeline::SimulationResult sim = parallel::pipeline::simulate(spec, costs);
          const plan::PipelineTime t = plan::pipeline_time(spec, costs);
          INFO("schedule " << parallel::pipeline::schedule_name(kind) << " p " << p << " m " << m
                           << " b/f " << b);
          CHECK(t.makespan == Approx(sim.makespan).epsilon(1e-9));
          double idle = 0;
          for (double f : sim.bubble_fraction) idle += f;
          CHECK(t.bubble == Approx(idle / p).epsilon(1e-9));
          // The memoized simulation, reached through other units, gives the same.
          const parallel::pipeline::SimulationCosts scaled{1.4, 1.4 * b, 0.7 * b, 0.7 * b};
          CHECK(plan::simulated(spec, scaled).makespan == Approx(2 * sim.makespan).epsilon(1e-9));
        }
      }
    }
  }
}

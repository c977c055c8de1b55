// Tests for `bench pp`'s arithmetic: compute time per kind from action timings, and the summary
// (slowest rank's step, idle fractions, medians, mean action costs) worked out by hand.
#include "tools/bench/pp_plan.h"

#include <catch2/catch.hpp>

#include "core/error.h"

using namespace tessera::bench;
using tessera::parallel::pipeline::ActionType;

TEST_CASE("add_action counts compute kinds and ignores transfers") {
  StepRecord r;
  add_action(r, ActionType::forward, 1.0);
  add_action(r, ActionType::forward, 2.0);
  add_action(r, ActionType::recv_activation, 5.0);
  add_action(r, ActionType::send_gradient, 5.0);
  add_action(r, ActionType::backward_input, 0.5);
  add_action(r, ActionType::backward_weight, 0.25);
  CHECK(r.seconds[size_t(ComputeKind::forward)] == 3.0);
  CHECK(r.actions[size_t(ComputeKind::forward)] == 2);
  CHECK(r.actions[size_t(ComputeKind::backward)] == 0);
  CHECK(r.busy() == 3.75);
  CHECK(compute_kind(ActionType::send_activation) == -1);
  CHECK(compute_kind(ActionType::recv_gradient) == -1);
}

TEST_CASE("median: the middle value, the mean of the middle two") {
  CHECK(median({3.0, 1.0, 2.0}) == 2.0);
  CHECK(median({4.0, 1.0, 3.0, 2.0}) == 2.5);
  CHECK_THROWS_AS(median({}), tessera::ValueError);
}

// One rank's step: its wall time, one forward and one backward of the given seconds.
StepRecord record(double wall, double forward, double backward, int64_t bytes) {
  StepRecord r;
  r.wall = wall;
  add_action(r, ActionType::forward, forward);
  add_action(r, ActionType::backward, backward);
  r.activation_bytes = bytes;
  return r;
}

TEST_CASE("summarize: slowest rank's step, idle fractions over it, mean costs") {
  // Step 0: walls 10 and 8 -> step 10; idle 1 - 6/10 = 0.4 and 1 - 4/10 = 0.6.
  // Step 1: walls 9 and 12 -> step 12; idle 1 - 6/12 = 0.5 and 1 - 6/12 = 0.5.
  // Step 2: walls 20 and 20 -> step 20; idle 1 - 10/20 = 0.5 and 1 - 4/20 = 0.8.
  const std::vector<std::vector<StepRecord>> records{
      {record(10, 2, 4, 100), record(9, 2, 4, 300), record(20, 4, 6, 200)},
      {record(8, 1, 3, 50), record(12, 2, 4, 50), record(20, 1, 3, 60)}};
  const PpSummary s = summarize(records);
  CHECK(s.step_seconds == 12.0);                               // median of 10, 12, 20
  CHECK(s.bubble_mean == Approx(0.5));                         // median of 0.5, 0.5, 0.65
  CHECK(s.bubble_max == Approx(0.6));                          // median of 0.6, 0.5, 0.8
  CHECK(s.costs.forward == Approx(12.0 / 6.0));                // 2+2+4+1+2+1 over 6 forwards
  CHECK(s.costs.backward == Approx(24.0 / 6.0));               // 4+4+6+3+4+3 over 6 backwards
  CHECK(s.costs.backward_input == 0.0);                        // none ran
  CHECK(s.activation_bytes == std::vector<int64_t>{300, 60});  // the largest per rank
}

TEST_CASE("summarize refuses ragged or empty records") {
  CHECK_THROWS_AS(summarize({}), tessera::ValueError);
  CHECK_THROWS_AS(summarize({{record(1, 0, 0, 0)}, {}}), tessera::ValueError);
}

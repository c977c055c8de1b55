// `bench pp`'s arithmetic, MPI-free: one rank's step summarised from the executor's action timings
// (compute seconds per kind), and every rank's steps summarised into what a row prints: the step
// time, the measured idle (bubble) fraction, the mean action costs the simulator is given.
//
// Definitions. A step's time is the slowest rank's wall time (every rank starts after a barrier),
// the simulator's makespan. Rank r's idle fraction in a step is 1 - busy_r / step, busy_r being
// the seconds r spent in compute actions (forward, backward, backward_input, backward_weight);
// transfers and waits count as idle, as in the simulator. Each figure is the median over the
// measured steps (ranks share cores, so single steps are noisy).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "parallel/pipeline/schedule.h"

namespace tessera::bench {

// The compute kinds, in this order; transfers are none of them.
enum class ComputeKind : int { forward = 0, backward = 1, backward_input = 2, backward_weight = 3 };
inline constexpr int kNumComputeKinds = 4;
// The kind of a compute action, or -1 for a send or receive.
int compute_kind(parallel::pipeline::ActionType type);

// One rank's step.
struct StepRecord {
  double wall = 0;                                  // seconds, barrier to run()'s return
  std::array<double, kNumComputeKinds> seconds{};   // compute seconds summed per kind
  std::array<int64_t, kNumComputeKinds> actions{};  // compute actions per kind
  int64_t activation_bytes = 0;  // allocator peak during the step minus the bytes held before
  double busy() const;
};

// Adds one action of `type` lasting `seconds` to the record (transfers are ignored).
void add_action(StepRecord& record, parallel::pipeline::ActionType type, double seconds);

struct PpSummary {
  double step_seconds = 0;  // median over steps of the slowest rank's wall time
  double bubble_mean = 0;   // median over steps of the idle fraction averaged over ranks
  double bubble_max = 0;    // median over steps of the largest rank's idle fraction
  // Mean duration of each compute kind over every rank and step (0 for a kind never run): the
  // simulator's F, B (full backward), B (input gradient) and W.
  parallel::pipeline::SimulationCosts costs{0, 0, 0, 0};
  std::vector<int64_t> activation_bytes;  // per rank: the largest over the steps
};

// records[rank][step], every rank with the same number of steps (at least one). Throws
// tessera::ValueError otherwise.
PpSummary summarize(const std::vector<std::vector<StepRecord>>& records);

// The median of a non-empty list (the mean of the middle two for an even count).
double median(std::vector<double> values);

}  // namespace tessera::bench

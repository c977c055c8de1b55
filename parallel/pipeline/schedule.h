// Pipeline schedules as data: a pure function from (schedule, stages, virtual stages,
// micro-batches, rank) to the ordered list of actions that rank performs in one training step, and
// a simulator that runs every rank's list together (no MPI) to prove the lists match, cannot
// deadlock and keep as many micro-batches in flight as the theory says. The executor
// (executor.h) runs a list over the pipeline group.
//
// Stages and chunks. With P pipeline ranks and v virtual stages (model chunks per rank) the model
// is cut into P * v stages; global stage s = chunk * P + rank (Megatron's interleaving: rank r
// holds stages r, r + P, r + 2P, ...). Stage 0 reads the micro-batch's inputs, stage P * v - 1
// computes the loss. Activations flow s -> s + 1, gradients s + 1 -> s.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::parallel::pipeline {

enum class ScheduleKind : uint8_t {
  gpipe,        // every forward, then every backward
  one_f_one_b,  // PipeDream-flush: warm-up forwards, then one forward / one backward, cool-down
  interleaved,  // 1F1B over v model chunks per rank (Megatron's interleaved schedule)
  zero_bubble,  // ZB-H1: backward split into B (input gradient) and W (weight gradient), the Ws
                // deferred to fill the cool-down bubbles; 1F1B's activation memory
};

enum class ActionType : uint8_t {
  forward,          // run the chunk's forward on micro_batch (its input already received)
  backward,         // full backward of the chunk on micro_batch (its output gradient received)
  backward_input,   // zero_bubble's B: the input gradient only, weight-gradient work deferred
  backward_weight,  // zero_bubble's W: the deferred weight-gradient work of micro_batch
  send_activation,  // send the chunk's output of micro_batch to `peer`
  recv_activation,  // receive the chunk's input of micro_batch from `peer`
  send_gradient,    // send the gradient w.r.t. the chunk's input of micro_batch to `peer`
  recv_gradient,    // receive the gradient w.r.t. the chunk's output of micro_batch from `peer`
};

struct Action {
  ActionType type = ActionType::forward;
  int micro_batch = 0;
  int chunk = 0;   // the model chunk on this rank, 0 .. v - 1 (global stage chunk * P + rank)
  int peer = -1;   // pipeline rank of the other side of a send / recv; -1 for compute
  bool operator==(const Action& o) const {
    return type == o.type && micro_batch == o.micro_batch && chunk == o.chunk && peer == o.peer;
  }
};

struct ScheduleSpec {
  ScheduleKind kind = ScheduleKind::one_f_one_b;
  int stages = 1;          // P: pipeline ranks
  int virtual_stages = 1;  // v: model chunks per rank (interleaved only; 1 otherwise)
  int micro_batches = 1;   // M
};

// "gpipe", "1f1b", "interleaved", "zero_bubble" <-> the kind; an unknown name throws ValueError
// listing the known ones.
ScheduleKind schedule_kind(const std::string& name);
// The schedule's own rules, read by check_schedule and by the configuration checks alike:
// whether it runs several model chunks per rank (virtual stages), and the number the micro-batches
// of a step must be a multiple of (interleaved: the stages, as Megatron's requires; others: 1).
bool runs_model_chunks(ScheduleKind kind);
int micro_batch_multiple(ScheduleKind kind, int stages);
const char* schedule_name(ScheduleKind kind);

// Throws ValueError naming the numbers unless the schedule can run: stages >= 1, micro_batches >=
// 1, virtual_stages >= 1 and > 1 only for interleaved (interleaved also needs micro_batches
// divisible by stages, as Megatron requires, and says so).
void check_schedule(const ScheduleSpec& spec);

// The actions pipeline rank `rank` performs in one step, in order (check_schedule first).
// Every forward of (chunk, m) is preceded by its recv_activation (unless global stage 0) and
// followed by its send_activation (unless the last global stage); every backward / backward_input
// by its recv_gradient (unless the last stage) and followed by its send_gradient (unless stage 0).
// Under zero_bubble every backward_input has exactly one backward_weight later in the list, and
// the list ends with every W done (before the optimizer step).
std::vector<Action> schedule_actions(const ScheduleSpec& spec, int rank);

// Runs every rank's list together with sends that never block (the executor's sends are
// asynchronous) and receives that block until their matching send has been issued; compute
// actions take the given unit times. Throws ValueError on a send without a matching receive (or
// the reverse), a mismatched (type, micro-batch, stage) pair, or a deadlock (naming the ranks and
// actions stuck).
struct SimulationCosts {
  double forward = 1, backward = 2, backward_input = 1, backward_weight = 1;  // backward = B + W
};
struct SimulationResult {
  double makespan = 0;                  // time at which the last rank finishes
  std::vector<double> busy;             // per rank: time spent in compute actions
  std::vector<double> bubble_fraction;  // per rank: 1 - busy / makespan
  std::vector<int> peak_in_flight;      // per rank: most micro-batch chunks forwarded whose
                                        // backward (B, or the full backward) has not run yet
};
SimulationResult simulate(const ScheduleSpec& spec, const SimulationCosts& costs = {});
// simulate() on given lists, one per pipeline rank (lists built or edited by hand, e.g. by tests).
// Besides the errors above, throws on an action that does not fit its rank's list: a chunk or
// micro-batch out of range, a peer other than the neighbouring stage's rank, a compute before its
// receive, a send before its compute, a repeated action, or a rank that ends with a forward,
// backward or deferred W not run.
SimulationResult simulate_lists(const ScheduleSpec& spec,
                                const std::vector<std::vector<Action>>& lists,
                                const SimulationCosts& costs = {});

// "forward(chunk 0, micro-batch 3)", "recv_gradient(chunk 1, micro-batch 0, peer 2)": for messages.
std::string to_string(const Action& a);
// "forward", "backward_input", "send_activation", ...
const char* action_type_name(ActionType t);

// The theory's idle fraction: (P - 1) / (M + P - 1) for gpipe and 1f1b (F + B costs), that over
// v for interleaved; for zero_bubble the simulator's value (no closed form is claimed), averaged
// over the ranks, under the default costs. (With equal chunk costs the simulator gives interleaved
// exactly (P - 1) / (v M + P - 1): the "over v" is Megatron's approximation for M >> P, so the
// simulated value sits slightly above it.)
double theoretical_bubble(const ScheduleSpec& spec);

}  // namespace tessera::parallel::pipeline

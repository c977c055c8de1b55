// Runs one rank's pipeline schedule (schedule.h) over the pipeline group: forwards and backwards
// of the model chunks this rank holds, activations and gradients sent to the neighbouring stages
// asynchronously and received where the list says. Knows groups and tensors, not modules: the
// caller's forward callback runs a chunk.
//
// Transfers. An activation travels with a small header (dtype and shape) so stages agree on
// shapes without configuration; its gradient comes back without one (it has the activation's
// shape). Tags name (micro-batch, receiving stage, kind), so messages may arrive in any order.
// Sends are asynchronous and waited for at the end of the step; a receive that does not complete
// within the group's communicator timeout (Communicator::timeout_s) throws naming both ranks, the
// micro-batch and the stage.
//
// Zero bubble: backward_input runs the backward inside autograd::DeferWeightGrads, so linear and
// matmul weight gradients are queued per (chunk, micro-batch); backward_weight runs that queue.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "parallel/comm/communicator.h"
#include "parallel/pipeline/schedule.h"

namespace tessera::parallel::pipeline {

struct StageCallbacks {
  // Chunk `chunk`'s forward of micro-batch `micro`. input: undefined on global stage 0 (the chunk
  // reads its own inputs), else the received activation, a leaf requiring grad. Returns the
  // activation to send on, or on the last stage the differentiable scalar to backpropagate.
  std::function<Tensor(int chunk, int micro, const Tensor& input)> forward;
  // Called before each backward-kind action (backward, backward_input, backward_weight) with
  // whether it is the chunk's last gradient work of the step (for gradient-sync hooks); optional.
  std::function<void(int chunk, int micro, bool last_for_chunk)> before_backward;
};

// What one action took, for the bubble measurement of `tessera bench pp`.
struct ActionTiming {
  Action action;
  double start = 0, end = 0;  // seconds since the step began
};

class PipelineExecutor {
 public:
  // group: the pipeline group (its rank is the stage index); spec.stages must equal its size.
  // device: where this stage computes; received activations and gradients are allocated there.
  PipelineExecutor(std::shared_ptr<Communicator> group, const ScheduleSpec& spec,
                   Device device = kCPU);

  // One training step's schedule. Throws ValueError naming the stage and micro-batch when a
  // callback throws, and on a receive timeout.
  void run(const StageCallbacks& callbacks);
  // Forward only, micro-batch after micro-batch (evaluation, generation): returns, on the rank
  // holding the last stage, each micro-batch's output of the last chunk; elsewhere undefined
  // tensors.
  std::vector<Tensor> run_forward(int micro_batches, const StageCallbacks& callbacks);

  const ScheduleSpec& spec() const { return spec_; }
  Communicator& group() const { return *group_; }
  const std::vector<Action>& actions() const { return actions_; }
  const std::vector<ActionTiming>& timings() const { return timings_; }

 private:
  struct InFlight {
    Tensor input;   // the received activation (a leaf), undefined on global stage 0
    Tensor output;  // what forward returned
    Tensor output_grad;
  };
  struct Deferred;  // the weight-gradient queues of zero_bubble

  int global_stage(int chunk) const { return chunk * spec_.stages + group_->rank(); }
  int last_stage() const { return spec_.stages * spec_.virtual_stages - 1; }
  int tag(int micro, int receiving_stage, int kind) const;
  Tensor recv_activation(int micro, int chunk, int peer);
  void send_activation(const Tensor& t, int micro, int chunk, int peer);
  void wait_for(const WorkPtr& work, const char* what, int micro, int chunk, int peer);
  void run_action(const Action& a, bool last_for_chunk, const StageCallbacks& cb,
                  std::map<std::pair<int, int>, InFlight>& live, Deferred& deferred);

  std::shared_ptr<Communicator> group_;
  ScheduleSpec spec_;
  std::vector<Action> actions_;
  std::vector<ActionTiming> timings_;
  std::vector<WorkPtr> pending_sends_;
  Device device_;
};


}  // namespace tessera::parallel::pipeline

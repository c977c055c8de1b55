// The pipeline executor (see executor.h).
#include "parallel/pipeline/executor.h"

#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <thread>

#include "autograd/deferred_grad.h"
#include "autograd/engine.h"
#include "core/error.h"
#include "core/profiler.h"
#include "core/factory.h"

namespace tessera::parallel::pipeline {

namespace {

constexpr int kMaxDims = 6;
constexpr int kHeaderSize = 2 + kMaxDims;  // dtype, ndim, dims
enum TagKind { kActivationHeader = 0, kActivation = 1, kGradient = 2 };

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A transfer whose peer may never come (this step failed) must not be waited for: destroying a
// pending work blocks until it completes. The step's error ends the job (run_distributed aborts),
// so the works are parked here, never destroyed, and the unwinding reaches the abort.
void abandon(std::vector<WorkPtr>& works) {
  static auto* parked = new std::vector<WorkPtr>();
  for (WorkPtr& w : works) parked->push_back(std::move(w));
  works.clear();
}

bool is_backward(ActionType t) {
  return t == ActionType::backward || t == ActionType::backward_input ||
         t == ActionType::backward_weight;
}

}  // namespace

struct PipelineExecutor::Deferred {
  std::map<std::pair<int, int>, autograd::WeightGradQueue> queues;  // (chunk, micro)
};

PipelineExecutor::PipelineExecutor(std::shared_ptr<Communicator> group, const ScheduleSpec& spec,
                                   Device device)
    : group_(std::move(group)), spec_(spec), device_(device) {
  check_schedule(spec_);
  TS_CHECK(group_ && group_->size() == spec_.stages, "pipeline", "expected a pipeline group of ",
           spec_.stages, " ranks, got ", group_ ? group_->size() : 0);
  actions_ = schedule_actions(spec_, group_->rank());
}

int PipelineExecutor::tag(int micro, int receiving_stage, int kind) const {
  return (micro * (last_stage() + 1) + receiving_stage) * 3 + kind;
}

void PipelineExecutor::wait_for(const WorkPtr& work, const char* what, int micro, int chunk,
                                int peer) {
  // The communicator's timeout, so one setting (TESSERA_COMM_TIMEOUT_S) bounds every wait. The
  // executor polls instead of arming the watchdog, so this message, naming the stage and the
  // micro-batch, comes first.
  const double timeout_s = group_->timeout_s();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (!work->is_completed()) {
    if (std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
      continue;
    }
    // Parked before the throw: destroying a pending receive would wait for it.
    std::vector<WorkPtr> stuck{work};
    abandon(stuck);
    TS_FAIL("pipeline", "rank ", group_->rank(), " (stage ", global_stage(chunk), ") waited ",
            timeout_s, " s for the ", what, " of micro-batch ", micro, " from pipeline rank ", peer,
            ", which never came (TESSERA_COMM_TIMEOUT_S sets the limit)");
  }
}

void PipelineExecutor::send_activation(const Tensor& t, int micro, int chunk, int peer) {
  TS_CHECK(t.defined() && t.dim() <= kMaxDims, "pipeline", "stage ", global_stage(chunk),
           " expected its forward to return an activation of at most ", kMaxDims,
           " dims for micro-batch ", micro, ", got ", t.defined() ? t.describe() : "undefined");
  std::vector<int64_t> header(kHeaderSize, 0);
  header[0] = int64_t(t.dtype());
  header[1] = t.dim();
  for (int64_t d = 0; d < t.dim(); ++d) header[2 + d] = t.size(d);
  const int to = global_stage(chunk) + 1;
  pending_sends_.push_back(
      group_->send(from_vector<int64_t>(header, {kHeaderSize}), peer, tag(micro, to, kActivationHeader)));
  pending_sends_.push_back(group_->send(t.detach().contiguous(), peer, tag(micro, to, kActivation)));
}

Tensor PipelineExecutor::recv_activation(int micro, int chunk, int peer) {
  const int me = global_stage(chunk);
  Tensor header = empty({kHeaderSize}, {.dtype = DType::i64});  // on the host: read here
  wait_for(group_->recv(header, peer, tag(micro, me, kActivationHeader)), "activation", micro,
           chunk, peer);
  const int64_t* h = header.data<int64_t>();
  Shape shape(h + 2, h + 2 + h[1]);
  Tensor x = empty(shape, {.dtype = DType(h[0]), .device = device_});
  wait_for(group_->recv(x, peer, tag(micro, me, kActivation)), "activation", micro, chunk, peer);
  return x;
}

void PipelineExecutor::run_action(const Action& a, bool last_for_chunk, const StageCallbacks& cb,
                                  std::map<std::pair<int, int>, InFlight>& live,
                                  Deferred& deferred) {
  const std::pair<int, int> key{a.chunk, a.micro_batch};
  const int stage = global_stage(a.chunk);
  switch (a.type) {
    case ActionType::recv_activation: {
      Tensor x = recv_activation(a.micro_batch, a.chunk, a.peer);
      x.set_requires_grad(true);
      live[key].input = x;
      return;
    }
    case ActionType::forward: {
      InFlight& f = live[key];
      f.output = cb.forward(a.chunk, a.micro_batch, f.input);
      TS_CHECK(f.output.defined(), "pipeline", "stage ", stage, " returned no output");
      return;
    }
    case ActionType::send_activation:
      send_activation(live.at(key).output, a.micro_batch, a.chunk, a.peer);
      return;
    case ActionType::recv_gradient: {
      InFlight& f = live.at(key);
      f.output_grad = empty(f.output.shape(), {.dtype = f.output.dtype(), .device = device_});
      wait_for(group_->recv(f.output_grad, a.peer, tag(a.micro_batch, stage, kGradient)),
               "gradient", a.micro_batch, a.chunk, a.peer);
      return;
    }
    case ActionType::backward:
    case ActionType::backward_input: {
      if (cb.before_backward) cb.before_backward(a.chunk, a.micro_batch, last_for_chunk);
      InFlight& f = live.at(key);
      std::optional<autograd::DeferWeightGrads> defer;
      if (a.type == ActionType::backward_input) defer.emplace(deferred.queues[key]);
      if (stage == last_stage())
        autograd::backward({f.output});
      else
        autograd::backward({f.output}, {f.output_grad});
      f.output = Tensor();
      f.output_grad = Tensor();
      if (stage == 0) live.erase(key);  // nothing to send back
      return;
    }
    case ActionType::backward_weight: {
      if (cb.before_backward) cb.before_backward(a.chunk, a.micro_batch, last_for_chunk);
      auto it = deferred.queues.find(key);
      TS_CHECK(it != deferred.queues.end(), "pipeline", "stage ", stage,
               " has no deferred weight gradients for micro-batch ", a.micro_batch);
      it->second.run();
      deferred.queues.erase(it);
      return;
    }
    case ActionType::send_gradient: {
      InFlight& f = live.at(key);
      Tensor g = f.input.grad();
      // An input the chunk did not use still owes its sender a gradient: zeros.
      if (!g.defined()) g = zeros(f.input.shape(), {.dtype = f.input.dtype()});
      pending_sends_.push_back(
          group_->send(g.contiguous(), a.peer, tag(a.micro_batch, stage - 1, kGradient)));
      live.erase(key);
      return;
    }
  }
}

void PipelineExecutor::run(const StageCallbacks& cb) {
  // The last gradient work of each chunk: what before_backward flags for the gradient sync.
  std::vector<bool> last_for_chunk(actions_.size(), false);
  std::map<int, size_t> last;
  for (size_t i = 0; i < actions_.size(); ++i)
    if (is_backward(actions_[i].type)) last[actions_[i].chunk] = i;
  for (const auto& [chunk, i] : last) last_for_chunk[i] = true;

  std::map<std::pair<int, int>, InFlight> live;
  Deferred deferred;
  timings_.clear();
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < actions_.size(); ++i) {
    const Action& a = actions_[i];
    const double start = seconds_since(t0);
    try {
      TS_PROFILE(action_type_name(a.type), "pipeline");
      run_action(a, last_for_chunk[i], cb, live, deferred);
    } catch (const std::exception& e) {
      abandon(pending_sends_);
      TS_FAIL("pipeline", "stage ", global_stage(a.chunk), " (pipeline rank ", group_->rank(),
              ") failed at micro-batch ", a.micro_batch, ": ", e.what());
    }
    timings_.push_back({a, start, seconds_since(t0)});
    // A send keeps its tensor alive until it completes: release the completed ones as the step
    // goes, so a stage holds the buffers of the sends in flight, not of every micro-batch's.
    std::erase_if(pending_sends_, [](const WorkPtr& w) { return w->is_completed(); });
  }
  for (const WorkPtr& w : pending_sends_) w->wait();
  pending_sends_.clear();
  TS_CHECK(deferred.queues.empty(), "pipeline", "the schedule left deferred weight gradients");
}

std::vector<Tensor> PipelineExecutor::run_forward(int micro_batches, const StageCallbacks& cb) {
  std::vector<Tensor> outputs(static_cast<size_t>(micro_batches));
  const int p = spec_.stages, rank = group_->rank();
  for (int m = 0; m < micro_batches; ++m) {
    for (int chunk = 0; chunk < spec_.virtual_stages; ++chunk) {
      const int stage = global_stage(chunk);
      try {
        Tensor input;
        if (stage > 0) input = recv_activation(m, chunk, (rank + p - 1) % p);
        Tensor out = cb.forward(chunk, m, input);
        if (stage == last_stage())
          outputs[size_t(m)] = out;
        else
          send_activation(out, m, chunk, (rank + 1) % p);
      } catch (const std::exception& e) {
        abandon(pending_sends_);
        TS_FAIL("pipeline", "stage ", stage, " (pipeline rank ", rank,
                ") failed at micro-batch ", m, ": ", e.what());
      }
    }
  }
  for (const WorkPtr& w : pending_sends_) w->wait();
  pending_sends_.clear();
  return outputs;
}

}  // namespace tessera::parallel::pipeline

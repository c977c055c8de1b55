// Multi-rank program run by executor_test.sh under mpirun: every schedule runs a chain of small
// layers split into P * v stages over the pipeline group, and after one step each stage's weight
// gradients, the micro-batch losses and the input gradient of stage 0 equal one process's serial
// backward of the same chain (every rank can compute it: all draw the same weights and batches).
// Modes: (none) the checks; `throw` stage 1 throws at micro-batch 2; `hang` rank 1 never sends,
// so rank 0's receive times out. Both must end the job naming the stage / ranks.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "core/factory.h"
#include "parallel/comm/mpi_runtime.h"
#include "parallel/data/data_parallel.h"
#include "parallel/pipeline/executor.h"
#include "tests/parallel/rank_check.h"

using namespace tessera;
using namespace tessera::parallel;
using namespace tessera::parallel::pipeline;

namespace {

using CommPtr = std::shared_ptr<Communicator>;
constexpr int64_t kBatch = 3, kWidth = 4;

Tensor draw(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  return mul(randn(shape, {}, &gen), 0.5);
}

// Stage s: x -> tanh(x W_s^T + b_s); the last stage also takes the mean square as the loss.
struct Chain {
  std::vector<Tensor> weights, biases;
  explicit Chain(int stages) {
    for (int s = 0; s < stages; ++s) {
      weights.push_back(draw({kWidth, kWidth}, 100 + s));
      biases.push_back(draw({kWidth}, 200 + s));
      weights.back().set_requires_grad(true);
      biases.back().set_requires_grad(true);
    }
  }
  Tensor stage(int s, const Tensor& x) const { return tanh(linear(x, weights[s], biases[s])); }
};

Tensor micro_input(int m) { return draw({kBatch, kWidth}, 1000 + m); }
Tensor loss_of(const Tensor& y) { return mean(mul(y, y)); }

void check_close(const Tensor& got, const Tensor& want, const std::string& what) {
  TS_CHECK(got.defined() && got.shape() == want.shape(), "executor_ranks", what,
           ": expected a gradient of shape ", shape_str(want.shape()));
  const Tensor g = got.contiguous(), w = want.contiguous();
  for (int64_t i = 0; i < w.numel(); ++i) {
    const double a = g.data<float>()[i], b = w.data<float>()[i];
    TS_CHECK(std::abs(a - b) <= 1e-6 * (1 + std::abs(b)), "executor_ranks", what, "[", i, "] = ", a,
             ", serial ", b);
  }
  ++testing::checks_passed();
}

void check_schedule(const CommPtr& world, ScheduleKind kind, int v, int micro_batches) {
  const int p = world->size(), stages = p * v;
  const ScheduleSpec spec{.kind = kind, .stages = p, .virtual_stages = v, .micro_batches = micro_batches};
  const std::string name = std::string(schedule_name(kind)) + " v=" + std::to_string(v) +
                           " M=" + std::to_string(micro_batches);

  // Serial: the accumulated gradients of the mean of the micro-batch losses.
  Chain serial(stages);
  std::vector<Tensor> serial_input_grads;
  double serial_loss = 0;
  for (int m = 0; m < micro_batches; ++m) {
    Tensor x = micro_input(m);
    x.set_requires_grad(true);
    Tensor y = x;
    for (int s = 0; s < stages; ++s) y = serial.stage(s, y);
    Tensor loss = loss_of(y);
    serial_loss += loss.item();
    autograd::backward({mul(loss, 1.0 / micro_batches)});
    serial_input_grads.push_back(x.grad());
  }

  Chain piped(stages);
  PipelineExecutor executor(world, spec);
  double loss_sum = 0;
  std::vector<Tensor> stage0_inputs(static_cast<size_t>(micro_batches));
  executor.run({.forward = [&](int chunk, int m, const Tensor& input) {
    const int s = chunk * p + world->rank();
    Tensor x = input;
    if (s == 0) {
      x = micro_input(m);
      x.set_requires_grad(true);
      stage0_inputs[size_t(m)] = x;
    }
    Tensor y = piped.stage(s, x);
    if (s != stages - 1) return y;
    Tensor loss = loss_of(y);
    loss_sum += loss.item();
    return mul(loss, 1.0 / micro_batches);
  }});
  for (int chunk = 0; chunk < v; ++chunk) {
    const int s = chunk * p + world->rank();
    check_close(piped.weights[s].grad(), serial.weights[s].grad(), name + " weight " + std::to_string(s));
    check_close(piped.biases[s].grad(), serial.biases[s].grad(), name + " bias " + std::to_string(s));
    TS_CHECK(!piped.weights[(s + 1) % stages].grad().defined() || v * p == 1, "executor_ranks", name,
             ": a stage this rank does not hold got a gradient");
  }
  if (world->rank() == 0) {
    for (int m = 0; m < micro_batches; ++m)
      check_close(stage0_inputs[size_t(m)].grad(), serial_input_grads[size_t(m)],
                  name + " input gradient of micro-batch " + std::to_string(m));
  }
  if (world->rank() == p - 1)
    TS_CHECK(std::abs(loss_sum - serial_loss) <= 1e-6 * std::abs(serial_loss), "executor_ranks",
             name, ": losses ", loss_sum, ", serial ", serial_loss);
  // The compute actions it timed: one forward and one backward (or B and W) per stage and micro-batch.
  int compute = 0;
  for (const ActionTiming& t : executor.timings())
    compute += t.action.peer < 0 ? 1 : 0;
  const int per_pair = kind == ScheduleKind::zero_bubble ? 3 : 2;
  TS_CHECK(compute == per_pair * v * micro_batches, "executor_ranks", name, ": ", compute,
           " compute actions timed");
}

// Forward only (evaluation): the last stage's outputs equal the serial chain's.
void check_forward_only(const CommPtr& world, int v) {
  const int p = world->size(), stages = p * v;
  Chain chain(stages);
  PipelineExecutor executor(
      world, {.kind = v > 1 ? ScheduleKind::interleaved : ScheduleKind::one_f_one_b, .stages = p,
              .virtual_stages = v, .micro_batches = p});
  const std::vector<Tensor> out = executor.run_forward(3, {.forward = [&](int chunk, int m, const Tensor& in) {
    const int s = chunk * p + world->rank();
    return chain.stage(s, s == 0 ? micro_input(m) : in);
  }});
  for (int m = 0; m < 3; ++m) {
    if (world->rank() != p - 1) {
      TS_CHECK(!out[size_t(m)].defined(), "executor_ranks", "forward only: an output off the last stage");
      continue;
    }
    Tensor y = micro_input(m);
    for (int s = 0; s < stages; ++s) y = chain.stage(s, y);
    check_close(out[size_t(m)], y, "forward only v=" + std::to_string(v));
  }
}

// Pipeline x data parallelism on 4 ranks (2 stages x 2 data replicas), as the trainer runs it:
// gradients accumulate unsynced, and just before each model chunk's final backward that chunk's
// sync group is turned on, so its buckets start inside that backward; under interleaving (v = 2)
// chunk 1 finishes first, and its reduction must be under way before chunk 0's final gradients
// arrive. Chunk 0's bias stands for a tied parameter (completed after backward: here doubled) and
// is reduced at finish from what its .grad() then holds. All equal the serial average over the
// replicas' micro-batches.
void check_overlapped_reduction(const CommPtr& world, ScheduleKind kind, int v) {
  const int stage = world->rank() % 2, replica = world->rank() / 2, micro_batches = 4;
  const std::string name =
      std::string("pp 2 x dp 2 ") + schedule_name(kind) + " v=" + std::to_string(v);
  CommPtr pipe = world->split(replica, world->rank(), "pipeline");
  CommPtr data = world->split(stage, world->rank(), "data");
  auto input = [&](int r, int m) { return micro_input(100 * r + m); };
  const int stages = 2 * v;
  auto global_stage = [&](int chunk) { return chunk * 2 + stage; };

  Chain serial(stages);
  for (int r = 0; r < 2; ++r)
    for (int m = 0; m < micro_batches; ++m) {
      Tensor y = input(r, m);
      for (int s = 0; s < stages; ++s) y = serial.stage(s, y);
      autograd::backward({mul(loss_of(y), 1.0 / (2 * micro_batches))});
    }

  Chain piped(stages);
  DataParallel::NamedParams params;
  std::vector<std::vector<std::string>> groups;
  for (int c = 0; c < v; ++c) {
    const std::string w = "weight" + std::to_string(c), b = "bias" + std::to_string(c);
    params.emplace_back(w, piped.weights[size_t(global_stage(c))]);
    params.emplace_back(b, piped.biases[size_t(global_stage(c))]);
    groups.push_back({w, b});
  }
  DataParallel dp(params, data,
                  {.bucket_cap_bytes = 1,
                   .record_events = true,
                   .completed_after_backward = {"bias0"},
                   .sync_groups = groups});
  std::optional<DataParallel::NoSyncGuard> no_sync(dp.no_sync());
  PipelineExecutor executor(
      pipe, {.kind = kind, .stages = 2, .virtual_stages = v, .micro_batches = micro_batches});
  std::vector<int> synced;
  executor.run({.forward = [&](int chunk, int m, const Tensor& in) {
                  const int s = global_stage(chunk);
                  Tensor y = piped.stage(s, s == 0 ? input(replica, m) : in);
                  return s == stages - 1 ? mul(loss_of(y), 1.0 / micro_batches) : y;
                },
                .before_backward = [&](int chunk, int, bool last) {
                  if (!last) return;
                  synced.push_back(chunk);
                  dp.sync_group(size_t(chunk));
                }});
  std::vector<int> want(static_cast<size_t>(v));
  for (int c = 0; c < v; ++c) want[size_t(c)] = v - 1 - c;  // the later chunk finishes first
  TS_CHECK(synced == want, "executor_ranks", name, ": expected each chunk's last backward flagged ",
           "once, the later chunk first");
  size_t first_start = SIZE_MAX, chunk0_weight_ready = SIZE_MAX;
  const std::vector<SyncEvent> events = dp.events();
  for (size_t i = 0; i < events.size(); ++i) {
    if (events[i].kind == SyncEvent::Kind::bucket_started && first_start == SIZE_MAX) first_start = i;
    if (events[i].kind == SyncEvent::Kind::grad_ready && events[i].index == 0) chunk0_weight_ready = i;
  }
  TS_CHECK(first_start != SIZE_MAX, "executor_ranks", name,
           ": expected an all-reduce to start within the backward");
  TS_CHECK(chunk0_weight_ready != SIZE_MAX, "executor_ranks", name,
           ": expected chunk 0's weight gradient to reach its bucket within its final backward");
  if (v > 1)
    TS_CHECK(first_start < chunk0_weight_ready, "executor_ranks", name,
             ": expected chunk 1's reduction to start before chunk 0's final gradients (event ",
             first_start, " vs ", chunk0_weight_ready, ")");
  no_sync.reset();
  Tensor tied = piped.biases[size_t(global_stage(0))];
  tied.set_grad(mul(tied.grad(), 2.0));  // completed after backward, before the reduction
  dp.finish_gradient_sync();
  for (int c = 0; c < v; ++c) {
    const size_t s = size_t(global_stage(c));
    check_close(piped.weights[s].grad(), serial.weights[s].grad(), name + " weight " + std::to_string(s));
    const Tensor want_bias = c == 0 ? mul(serial.biases[s].grad(), 2.0) : serial.biases[s].grad();
    check_close(piped.biases[s].grad(), want_bias, name + " bias " + std::to_string(s));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  return run_distributed(argc, argv, [&](const CommPtr& world) {
    const int p = world->size();
    if (mode == "throw" || mode == "hang" || mode == "device") {
      // "device": the stages compute on a GPU, so what they receive is allocated there (on a host
      // without one that allocation fails, where a CPU buffer would silently have been used).
      PipelineExecutor executor(
          world, {.kind = ScheduleKind::one_f_one_b, .stages = p, .micro_batches = 4},
          mode == "device" ? Device{DeviceType::cuda, 0} : kCPU);
      Chain chain(p);
      executor.run({.forward = [&](int, int m, const Tensor& input) {
        const int s = world->rank();
        if (mode == "throw" && s == 1 && m == 2) TS_FAIL("test", "a layer failed on purpose");
        // Long past rank 0's timeout, but bounded: the job ends even if the abort is slow to
        // reach this rank.
        if (mode == "hang" && s == 1) std::this_thread::sleep_for(std::chrono::seconds(8));
        Tensor y = chain.stage(s, s == 0 ? micro_input(m) : input);
        return s == p - 1 ? loss_of(y) : y;
      }});
      return 0;
    }
    for (int m : {1, 2, 5, 8}) {
      check_schedule(world, ScheduleKind::gpipe, 1, m);
      check_schedule(world, ScheduleKind::one_f_one_b, 1, m);
      check_schedule(world, ScheduleKind::zero_bubble, 1, m);
    }
    for (int v : {2, 3})
      for (int m : {p, 2 * p}) check_schedule(world, ScheduleKind::interleaved, v, m);
    check_forward_only(world, 1);
    check_forward_only(world, 2);
    if (p == 4) {
      for (ScheduleKind kind :
           {ScheduleKind::gpipe, ScheduleKind::one_f_one_b, ScheduleKind::zero_bubble})
        check_overlapped_reduction(world, kind, 1);
      check_overlapped_reduction(world, ScheduleKind::interleaved, 2);
    }
    world->barrier()->wait();
    if (world->rank() == 0)
      std::printf("executor: all checks passed on %d ranks (%lld checks on rank 0)\n", p,
                  static_cast<long long>(testing::checks_passed()));
    return 0;
  });
}

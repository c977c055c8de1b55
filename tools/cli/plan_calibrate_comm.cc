// Times Tessera's collectives (the public Communicator API, started and waited for at once, as
// layers call them) on f32 buffers, the way `bench comm` does: batches of calls after a barrier,
// the slowest rank's time per call, the median of several batches.
#include "tools/cli/plan_calibrate_comm.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <thread>

#include "core/error.h"
#include "core/factory.h"
#include "models/plan/calibration.h"
#include "models/plan/validation.h"

namespace tessera::cli {
namespace {

using parallel::Communicator;
using plan::Collective;

constexpr int kGateTag = 31007;  // the quiet gate's messages, apart from any other traffic

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Buffers for one payload of `bytes` (the full payload: all_gather's output, reduce_scatter's
// input) on p ranks, in f32 elements divisible by p.
struct Buffers {
  Tensor full, part, out;
  int64_t bytes = 0;
};

Buffers make_buffers(int64_t bytes, int p) {
  const int64_t numel = std::max<int64_t>(p, bytes / 4 / p * p);
  return {zeros({numel}), zeros({numel / p}), zeros({numel}), numel * 4};
}

// One call of `c`. send_recv is a ping-pong between group ranks 0 and 1 (two messages a call).
std::function<void()> call_of(Communicator& comm, Collective c, const Buffers& b) {
  switch (c) {
    case Collective::all_reduce:
      return [&comm, t = b.full] { comm.all_reduce(t)->wait(); };
    case Collective::reduce_scatter:
      return [&comm, in = b.full, out = b.part] { comm.reduce_scatter(in, out)->wait(); };
    case Collective::all_gather:
      return [&comm, in = b.part, out = b.full] { comm.all_gather(in, out)->wait(); };
    case Collective::broadcast:
      return [&comm, t = b.full] { comm.broadcast(t, 0)->wait(); };
    case Collective::reduce:
      return [&comm, t = b.full] { comm.reduce(t, 0)->wait(); };
    case Collective::all_to_all:
      return [&comm, in = b.full, out = b.out] { comm.all_to_all(in, out)->wait(); };
    case Collective::send_recv: {
      const int me = comm.rank();
      if (me > 1) return [] {};
      return [&comm, t = b.full, me] {
        if (me == 0) comm.send(t, 1)->wait();
        comm.recv(t, 1 - me)->wait();
        if (me == 1) comm.send(t, 0)->wait();
      };
    }
  }
  return [] {};
}

// Seconds per call over a batch started together: the slowest rank's.
double time_batch(Communicator& comm, const std::function<void()>& call, int calls) {
  comm.barrier()->wait();
  const double start = now_s();
  for (int i = 0; i < calls; ++i) call();
  Tensor per_call = from_vector<double>({(now_s() - start) / calls}, {1});
  comm.all_reduce(per_call, parallel::ReduceOp::max)->wait();
  return per_call.item();
}

// The median seconds of one call of `c` at each payload, fitted to the ring model.
plan::LinkCost fit_collective(Communicator& group, Collective c, const CommOptions& options) {
  std::vector<plan::TimedPayload> samples;
  for (int64_t payload : options.payloads) {
    const Buffers b = make_buffers(payload, group.size());
    const std::function<void()> call = call_of(group, c, b);
    const int calls = int(std::clamp<int64_t>(options.batch_bytes / b.bytes, 1, 200));
    time_batch(group, call, calls);  // warm-up: buffers, protocols, the ring's first setup
    std::vector<double> times;
    for (int r = 0; r < options.rounds; ++r) times.push_back(time_batch(group, call, calls));
    const double per_message = c == Collective::send_recv ? 0.5 : 1.0;
    samples.push_back({b.bytes, plan::median(times) * per_message});
  }
  return plan::fit_link(c, group.size(), samples);
}

// A compute burst of about 0.1 ms on one core: dependent multiply-adds on a small array,
// returned so the compiler keeps them.
float burst(std::vector<float>& data) {
  for (int pass = 0; pass < 48; ++pass)
    for (float& x : data) x = x * 0.999f + 0.001f;
  return data[0];
}

// Seconds per iteration of `body` over `iterations`, the slowest active rank's.
double per_iteration(Communicator& group, int iterations, const std::function<void()>& body) {
  group.barrier()->wait();
  const double start = now_s();
  for (int i = 0; i < iterations; ++i) body();
  Tensor t = from_vector<double>({(now_s() - start) / iterations}, {1});
  group.all_reduce(t, parallel::ReduceOp::max)->wait();
  return t.item();
}

double loaded_wait(Communicator& group, bool quick) {
  std::vector<float> data(4096, 1.0f);
  volatile float sink = 0;
  Tensor value = zeros({1});
  const int iterations = quick ? 20 : 200;
  const auto compute = [&] { sink = sink + burst(data); };
  const auto call = [&] { group.all_reduce(value)->wait(); };
  std::vector<double> waits;
  for (int r = 0; r < (quick ? 1 : 3); ++r) {
    const double alone = per_iteration(group, iterations, compute);
    const double idle = per_iteration(group, iterations, call);
    const double both = per_iteration(group, iterations, [&] {
      compute();
      call();
    });
    waits.push_back(std::max(0.0, both - alone - idle));
  }
  return plan::median(waits);
}

}  // namespace

std::map<int, double> measure_loaded_waits(const std::shared_ptr<Communicator>& world,
                                           bool quick) {
  std::map<int, double> waits;
  const int n = world->size(), me = world->rank();
  for (int p = 2; p <= n; ++p) {
    auto group = world->split(me < p ? 0 : -1, me, str_cat("loaded", p));
    if (!group) {
      wait_quietly(*world, 0);
      continue;
    }
    const double wait = loaded_wait(*group, quick);
    if (me == 0) waits[p] = wait;
    std::vector<int> idle;
    for (int r = p; r < n; ++r) idle.push_back(r);
    if (me == 0) release_waiting(*world, idle);
  }
  return waits;
}

void wait_quietly(Communicator& world, int from) {
  Tensor token = zeros({1});
  const parallel::WorkPtr work = world.recv(token, from, kGateTag);
  while (!work->is_completed()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  work->wait();
}

void release_waiting(Communicator& world, const std::vector<int>& waiting) {
  Tensor token = zeros({1});
  for (int rank : waiting) world.send(token, rank, kGateTag)->wait();
}

std::map<Collective, std::map<int, plan::LinkCost>> measure_collectives(
    const std::shared_ptr<Communicator>& world, const CommOptions& options) {
  TS_CHECK(options.payloads.size() >= 2, "calibrate",
           "expected two payload sizes or more to fit a collective, got ", options.payloads.size());
  std::map<Collective, std::map<int, plan::LinkCost>> fits;
  const int n = world->size(), me = world->rank();
  for (int p = 2; p <= n; ++p) {
    auto group = world->split(me < p ? 0 : -1, me, str_cat("calibrate", p));
    if (!group) {
      wait_quietly(*world, 0);
      continue;
    }
    for (Collective c : plan::kCollectives) {
      if (c == Collective::send_recv && p != 2) continue;
      const plan::LinkCost link = fit_collective(*group, c, options);
      if (me == 0) fits[c][p] = link;
    }
    std::vector<int> idle;
    for (int r = p; r < n; ++r) idle.push_back(r);
    if (me == 0) release_waiting(*world, idle);
  }
  return fits;
}

}  // namespace tessera::cli

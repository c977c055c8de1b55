// Multi-rank program run by comm_test.sh under mpirun on 1, 2, 4 and 8 ranks: every collective
// and communicator feature, checked on every rank. Any failure aborts the job non-zero.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <thread>
#include <vector>

#include "core/factory.h"
#include "parallel/comm/mpi_runtime.h"
#include "tests/parallel/collective_checks.h"
#include "tests/parallel/rank_check.h"

using namespace tessera;
using namespace tessera::parallel;
using testing::element;

namespace {

// The reduction over p ranks of (base + rank) (f32) and of k * (rank + 1) (i64; avg reduces by
// sum), as the ring checks fill their tensors.
double want_f32(ReduceOp op, double base, int p) {
  const double ranks_sum = p * (p - 1) / 2.0;
  return op == ReduceOp::sum   ? p * base + ranks_sum
         : op == ReduceOp::avg ? base + ranks_sum / p
         : op == ReduceOp::max ? base + p - 1
                               : base;
}
double want_i64(ReduceOp op, double k, int p) {
  return op == ReduceOp::max ? k * p : op == ReduceOp::min ? k : k * (p * (p - 1) / 2.0 + p);
}

// Waits by MPI_Wait (under the watchdog) and by polling, mixed: collectives behind point-to-point
// traffic, two groups waited for in reverse order, a polled work beside a waited one, 16-bit avg
// (the finishing step), a dropped work (its destructor waits), and two threads with blocking
// waits at once (one watchdog slot each).
void check_wait_paths(Communicator& world) {
  const int p = world.size(), me = world.rank();
  const double ranks_sum = p * (p - 1) / 2.0;
  const int next = (me + 1) % p, prev = (me + p - 1) % p;

  // An all_reduce, then point-to-point traffic, the all_reduce waited for last.
  Tensor a = full({300}, me);
  WorkPtr wa = world.all_reduce(a);
  Tensor sent = full({7}, me), got = empty({7});
  WorkPtr ws = world.send(sent, next, 3), wr = world.recv(got, prev, 3);
  wr->wait();
  ws->wait();
  wa->wait();
  RANK_CHECK(element(got, 6) == prev, "recv behind an all_reduce");
  RANK_CHECK(element(a, 299) == ranks_sum, "all_reduce started by a later send");

  // Collectives on two communicators, waited for in the opposite order.
  auto sub = world.split(me % 2, me);
  Tensor b = full({64}, 1.0), c = full({64}, me + 1.0);
  WorkPtr wb = world.all_reduce(b, ReduceOp::max);
  WorkPtr wc = sub->all_reduce(c);
  wc->wait();
  wb->wait();
  double sub_sum = 0;
  for (int r = me % 2; r < p; r += 2) sub_sum += r + 1.0;
  RANK_CHECK(element(c, 63) == sub_sum, "sub-group all_reduce waited first");
  RANK_CHECK(element(b, 0) == 1.0, "world all_reduce waited second");

  // A work polled to completion, another one behind it waited for.
  Tensor d = full({5}, me), e = full({5}, 2.0);
  WorkPtr wd = world.all_reduce(d, ReduceOp::min);
  WorkPtr we = world.all_reduce(e, ReduceOp::prod);
  while (!wd->is_completed()) {
  }
  we->wait();
  RANK_CHECK(element(d, 4) == 0.0, "polled min");
  RANK_CHECK(element(e, 4) == double(1 << std::min(p, 30)), "prod behind a polled work");

  // 16-bit floats with avg, waited for at once and behind a barrier, each rounded back into the
  // caller's tensor.
  for (bool at_once : {true, false}) {
    Tensor h = full({33}, 2.0 * me, {.dtype = DType::bf16});
    WorkPtr wh = world.all_reduce(h, ReduceOp::avg);
    if (!at_once) world.barrier()->wait();
    wh->wait();
    RANK_CHECK_CLOSE(DType::bf16, element(h, 32), 2.0 * ranks_sum / p, "bf16 avg, at once ",
                     at_once);
  }

  // All-reduces of 256 KB and more take the ring (mpi_ring.h; the smaller ones above took
  // recursive doubling on groups of 2, 4 and 8, Open MPI's on 3 ranks): an odd count (chunks of
  // unequal length), sum, avg, max and min on f32 and i64, bf16 avg (staged in f32), bool or,
  // waited for at once, polled, and two in flight at once (distinct tags), against the serial
  // values.
  const int64_t big = (int64_t(256) << 10) / 4 + 3;
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max, ReduceOp::min}) {
    Tensor x = empty({big}), y = empty({big}, {.dtype = DType::i64});
    for (int64_t i = 0; i < big; ++i) {
      x.data<float>()[i] = float((i % 5) + me);
      y.data<int64_t>()[i] = (i % 3) * (me + 1);
    }
    WorkPtr wx = world.all_reduce(x, op);
    WorkPtr wy = world.all_reduce(y, op == ReduceOp::avg ? ReduceOp::sum : op);
    while (!wx->is_completed()) {
    }
    wy->wait();
    for (int64_t i : {int64_t(0), big / 2, big - 1}) {
      RANK_CHECK_CLOSE(DType::f32, element(x, i), want_f32(op, double(i % 5), p), "ring f32 ",
                       reduce_op_name(op), " i=", i);
      RANK_CHECK(element(y, i) == want_i64(op, double(i % 3), p), "ring i64 ", reduce_op_name(op),
                 " i=", i);
    }
  }
  Tensor hb = full({big}, 1.0 + me, {.dtype = DType::bf16});
  world.all_reduce(hb, ReduceOp::avg)->wait();
  RANK_CHECK_CLOSE(DType::bf16, element(hb, big - 1), 1.0 + ranks_sum / p, "ring bf16 avg");
  Tensor flags = zeros({big * 4}, {.dtype = DType::b8});
  if (me == p - 1) flags.data<bool>()[big * 4 - 1] = true;
  world.all_reduce(flags, ReduceOp::max)->wait();
  RANK_CHECK(element(flags, big * 4 - 1) == 1.0 && element(flags, 0) == 0.0, "ring bool or");

  // Reduce-scatters of 256 KB of input and more take the ring's first half (mpi_ring.h): sum, avg,
  // max and min on f32 and i64, bf16 avg (staged in f32), waited for at once and polled, and two
  // in flight at once, every rank's block against the serial values.
  const int64_t block = (int64_t(256) << 10) / 4 / p + 5;
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max, ReduceOp::min}) {
    Tensor x = empty({block * p}), y = empty({block * p}, {.dtype = DType::i64});
    for (int64_t i = 0; i < block * p; ++i) {
      x.data<float>()[i] = float((i % 7) + me);
      y.data<int64_t>()[i] = (i % 3) * (me + 1);
    }
    Tensor xo = full({block}, -1.0), yo = full({block}, -1.0, {.dtype = DType::i64});
    WorkPtr wx = world.reduce_scatter(x, xo, op);
    WorkPtr wy = world.reduce_scatter(y, yo, op == ReduceOp::avg ? ReduceOp::sum : op);
    while (!wx->is_completed()) {
    }
    wy->wait();
    for (int64_t j : {int64_t(0), block / 2, block - 1}) {
      const int64_t i = me * block + j;  // this rank's block of the input
      RANK_CHECK_CLOSE(DType::f32, element(xo, j), want_f32(op, double(i % 7), p),
                       "ring reduce_scatter f32 ", reduce_op_name(op), " j=", j);
      RANK_CHECK(element(yo, j) == want_i64(op, double(i % 3), p), "ring reduce_scatter i64 ",
                 reduce_op_name(op), " j=", j);
    }
    RANK_CHECK(element(x, block * p - 1) == double(((block * p - 1) % 7) + me),
               "reduce_scatter leaves its input as it was");
  }
  Tensor hs = full({block * p}, 1.0 + me, {.dtype = DType::bf16});
  Tensor hso = empty({block}, {.dtype = DType::bf16});
  world.reduce_scatter(hs, hso, ReduceOp::avg)->wait();
  RANK_CHECK_CLOSE(DType::bf16, element(hso, block - 1), 1.0 + ranks_sum / p, "ring reduce_scatter bf16 avg");

  // A work dropped without a wait completes (its destructor waits).
  Tensor f = full({9}, 1.0);
  world.all_reduce(f);
  RANK_CHECK(element(f, 8) == p, "all_reduce whose work was dropped");

  // Two threads, each with its own communicator, waiting at once.
  auto left = world.split(0, me, "left"), right = world.split(0, me, "right");
  std::vector<double> results(2, 0.0);
  auto hammer = [&](Communicator& comm, int slot) {
    Tensor t = full({128}, me + slot);
    for (int i = 0; i < 40; ++i) {
      t.fill_(me + slot);
      comm.all_reduce(t)->wait();
    }
    results[size_t(slot)] = element(t, 127);
  };
  std::thread other(hammer, std::ref(*right), 1);
  hammer(*left, 0);
  other.join();
  RANK_CHECK(results[0] == ranks_sum, "thread 0's all_reduce");
  RANK_CHECK(results[1] == ranks_sum + p, "thread 1's all_reduce");
  world.barrier()->wait();
}

}  // namespace

int main(int argc, char** argv) {
  return run_distributed(argc, argv, [](const std::shared_ptr<Communicator>& world) {
    testing::run_collective_checks(*world);
    testing::run_feature_checks(*world);
    testing::run_routed_checks(world);
    check_wait_paths(*world);
    world->barrier()->wait();
    if (world->rank() == 0) {
      std::printf("comm: all checks passed on %d ranks (%lld checks on rank 0)\n", world->size(),
                  static_cast<long long>(testing::checks_passed()));
    }
    return 0;
  });
}

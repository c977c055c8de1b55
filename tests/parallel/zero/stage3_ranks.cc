// Multi-rank program run by zero_test.sh under mpirun on 2 and 4 ranks: ZeRO stage 3's released
// parameters (parallel/zero/stage3_params.h) through ShardedOptimizer, on bare ops. Building it
// returns every parameter's bytes to the allocator (the counters drop by exactly the parameters
// less the shards kept); a read gathers the right values (f32 and bf16) and keeps at most
// live_params gathered; views of released parameters saved for backward re-gather them, giving
// the unsharded gradients; the first step's gather order is recorded and the next steps prefetch
// along it with the same results; writes into a gathered parameter survive its release; after the
// optimizer step the parameters read as the rounded masters; under auto placement a write reaches
// the chunks' device copies and their host homes alike; a parameter read after its optimizer
// is gone fails naming it. Any failure aborts the job naming the rank.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/allocator.h"
#include "core/factory.h"
#include "core/generator.h"
#include "parallel/comm/mpi_runtime.h"
#include "parallel/zero/sharded_optimizer.h"
#include "tests/parallel/rank_check.h"

namespace tessera::parallel::zero {
namespace {

using NamedParams = ShardedOptimizer::NamedParams;

int64_t held() { return memory_stats(kCPU).current_bytes; }

// x (3, 5) -> w1 (7, 5), b1 (7) -> w2 (4, 7): sizes whose shard boundaries fall inside them.
struct Net {
  explicit Net(DType dtype) {
    Generator gen(11);
    for (const auto& [name, shape] :
         std::vector<std::pair<std::string, Shape>>{{"w1", {7, 5}}, {"b1", {7}}, {"w2", {4, 7}}}) {
      Tensor t = randn(shape, {}, &gen);
      if (dtype != DType::f32) t = t.to(dtype);
      originals.push_back(t.clone());
      t.set_requires_grad(true);
      named.emplace_back(name, t);
    }
  }
  const Tensor& w1() const { return named[0].second; }
  const Tensor& b1() const { return named[1].second; }
  const Tensor& w2() const { return named[2].second; }
  // sum((x w1^T + b1) w2^T)^2); x requires grad, so backward reads w1 and w2 again.
  Tensor loss(const Tensor& x) const {
    Tensor h = add(matmul(x, transpose(w1(), 0, 1)), b1());
    return sum(square(matmul(h, transpose(w2(), 0, 1))));
  }
  NamedParams named;
  std::vector<Tensor> originals;  // unreleased copies of the initial values
};

Tensor to_f32(const Tensor& t) { return t.detach().to(DType::f32).contiguous(); }

void check_equal(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  const Tensor a = to_f32(got), b = to_f32(want);
  RANK_CHECK(a.shape() == b.shape(), what, ": ", a.describe(), " vs ", b.describe());
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double x = a.data<float>()[i], y = b.data<float>()[i];
    RANK_CHECK(std::fabs(x - y) <= tol * std::fmax(1.0, std::fabs(y)), what, ": element ", i, " ",
               x, " vs ", y);
  }
}

std::unique_ptr<ShardedOptimizer> stage3(const Net& net, const std::shared_ptr<Communicator>& comm,
                                         int64_t live = 2) {
  const nlohmann::json sgd = {{"type", "sgd"}, {"lr", 0.1}};
  std::vector<optim::ParamGroup> groups = {optim::ParamGroup{.params = {}}};
  for (const auto& [name, t] : net.named) groups[0].params.push_back(t);
  return std::make_unique<ShardedOptimizer>(
      net.named, groups, sgd, comm,
      ZeroOptions{.stage = 3, .stage3 = {.live_params = live, .prefetch = 1, .poison = true}});
}

// Releasing hands the bytes back; reading gathers them with at most live_params kept.
void check_release_and_gather(DType dtype, const std::shared_ptr<Communicator>& comm) {
  const std::string what = str_cat(dtype_name(dtype), " release and gather");
  Net net(dtype);
  int64_t param_bytes = 0;
  for (const auto& [name, t] : net.named) param_bytes += int64_t(t.storage()->nbytes());
  const int64_t before = held();
  auto zero = stage3(net, comm);
  const auto window = zero->gather_window();
  const int64_t shard = zero->plan().groups[0].shard_numel;
  // Kept: the f32 master shard, and for 16-bit parameters their own shard in that dtype.
  const int64_t kept = 4 * shard + (dtype == DType::f32 ? 0 : int64_t(dtype_size(dtype)) * shard);
  RANK_CHECK(held() - before == kept - param_bytes, what, ": the counters moved by ",
             held() - before, " bytes, expected ", kept, " kept - ", param_bytes, " released");
  for (const auto& [name, t] : net.named)
    RANK_CHECK(t.storage()->released(), what, ": '", name, "' still holds its bytes");

  for (size_t i = 0; i < net.named.size(); ++i)
    check_equal(net.named[i].second, net.originals[i], 0.0, what + " " + net.named[i].first);
  // Three read, two kept: the first is released again.
  RANK_CHECK(zero->stage3()->live() == 2, what, ": ", zero->stage3()->live(), " live");
  RANK_CHECK(net.w1().storage()->released() && !net.w2().storage()->released(), what,
             ": expected w1 released and w2 gathered");
  const int64_t live_bytes = int64_t(net.b1().storage()->nbytes() + net.w2().storage()->nbytes());
  RANK_CHECK(held() - before == kept - param_bytes + live_bytes, what, ": ", held() - before);
  // A view reads through the same storage: w1's second row.
  check_equal(net.w1().select(0, 1), net.originals[0].select(0, 1), 0.0, what + " view");
  zero->finish_gradient_sync();  // ends the window: everything released
  RANK_CHECK(zero->stage3()->live() == 0, what, ": ", zero->stage3()->live(),
             " live after the window");
  RANK_CHECK(held() - before == kept - param_bytes + 4 * shard, what,
             ": after the window (the f32 shard gradient is new) ", held() - before);
}

// The unsharded reference: the same loss on plain copies, its gradients.
struct Reference {
  Tensor x_grad;
  std::vector<Tensor> grads;
};
Reference reference(const Net& net, const Tensor& x) {
  std::vector<Tensor> p;
  for (const Tensor& t : net.originals) p.push_back(t.clone().set_requires_grad(true));
  Tensor xr = x.detach().clone().set_requires_grad(true);
  Tensor h = add(matmul(xr, transpose(p[0], 0, 1)), p[1]);
  autograd::backward({sum(square(matmul(h, transpose(p[2], 0, 1))))});
  return {xr.grad(), {p[0].grad(), p[1].grad(), p[2].grad()}};
}

// Forward and backward through released parameters; the order of the first is recorded and the
// later ones prefetch along it.
void check_backward_and_order(const std::shared_ptr<Communicator>& comm) {
  const std::string what = "backward";
  Net net(DType::f32);
  Generator gen(5);
  const Tensor x0 = randn({3, 5}, {}, &gen);
  const Reference ref = reference(net, x0);
  auto zero = stage3(net, comm);
  const auto window = zero->gather_window();
  const Stage3Params& s3 = *zero->stage3();
  Tensor first_grad;
  for (int step = 0; step < 3; ++step) {
    const std::string at = str_cat(what, " step ", step);
    Tensor x = x0.clone().set_requires_grad(true);
    const int64_t start_gathers = s3.stats().gathers;
    Tensor loss = net.loss(x);
    // w1's saved transposed view is all backward has of it, and w1 is released by now (live 2).
    RANK_CHECK(net.w1().storage()->released(), at, ": expected w1 released before backward");
    autograd::backward({loss});
    // w1, b1, w2 in forward and w1 again for backward (from step 1 on, started ahead in forward).
    RANK_CHECK(s3.stats().gathers - start_gathers == 4, at, ": gathered ",
               s3.stats().gathers - start_gathers, " parameters, expected 4");
    check_equal(x.grad(), ref.x_grad, 1e-6, at + " x.grad");
    if (step == 0) first_grad = x.grad().clone();
    check_equal(x.grad(), first_grad, 0.0, at + " x.grad equals the first step's");
    zero->finish_gradient_sync();
    // Every rank's x is the same: the averaged shard gradient is the reference's.
    const Tensor g = zero->shard_params()[0].grad();
    for (const ShardPiece& pc : zero->plan().groups[0].pieces(comm->rank()))
      check_equal(g.narrow(0, pc.shard_offset, pc.numel),
                  ref.grads[pc.param].reshape({-1}).narrow(0, pc.param_offset, pc.numel), 1e-6,
                  at + " shard gradient of " + net.named[pc.param].first);
    const AccessOrder& order = s3.access_order();
    RANK_CHECK(order.recorded(), at, ": no order recorded after a training window");
    // Forward w1, b1, w2; backward reads w2 (still gathered) and w1 again.
    RANK_CHECK((order.order() == std::vector<size_t>{0, 1, 2, 0}), at, ": recorded order of ",
               order.order().size(), " gathers");
    // Step 0 records; each later step gathers b1, w2 and (for backward) w1 ahead of their use.
    RANK_CHECK(s3.stats().prefetched == 3 * step, at, ": ", s3.stats().prefetched,
               " gathers used ahead of time, expected ", 3 * step);
    zero->zero_grad();
  }
}

// In-place writes survive the release; the optimizer step lands in what the parameters read.
void check_writes_and_update(DType dtype, const std::shared_ptr<Communicator>& comm) {
  const std::string what = str_cat(dtype_name(dtype), " writes and update");
  Net net(dtype);
  auto zero = stage3(net, comm);
  const auto window = zero->gather_window();
  {
    autograd::NoGradGuard no_grad;
    net.w1().fill_(0.5);  // gathers w1, then writes it
  }
  (void)net.b1().data_ptr();
  (void)net.w2().data_ptr();  // w1 is released (live 2), its writes kept in the shard
  RANK_CHECK(net.w1().storage()->released(), what, ": expected w1 released");
  check_equal(net.w1(), full({7, 5}, 0.5), 0.0, what + " w1 after its release");
  RANK_CHECK(zero->stage3()->stats().written_back >= 1, what, ": nothing written back");

  // One SGD step on a known gradient: every parameter reads as its master, rounded.
  Generator gen(9);
  autograd::backward({net.loss(randn({3, 5}, {}, &gen))});
  zero->finish_gradient_sync();
  zero->optimizer().step();
  zero->gather_parameters();
  std::vector<Tensor> masters;
  for (const auto& [name, t] : net.named) masters.push_back(zeros(t.shape()));
  zero->gather_masters(masters);
  for (size_t i = 0; i < masters.size(); ++i)
    check_equal(net.named[i].second, masters[i].to(dtype), 0.0,
                what + " " + net.named[i].first + " after the step");
  zero->zero_grad();
}

// auto placement keeps every chunk's home on the host and device copies of some: a write into a
// gathered parameter lands in both, so its next read finds the new values in the copy, and after
// the copy is dropped, in the home the next copy is fetched from.
void check_write_back_with_copies(const std::shared_ptr<Communicator>& comm) {
  const std::string what = "write-back with device copies";
  Net net(DType::f32);
  const nlohmann::json sgd = {{"type", "sgd"}, {"lr", 0.1}};
  std::vector<optim::ParamGroup> groups = {optim::ParamGroup{.params = {}}};
  for (const auto& [name, t] : net.named) groups[0].params.push_back(t);
  // One element a chunk: every piece is a chunk of its own; a limit that holds every copy.
  const ParamPlacement placement{.policy = PlacementPolicy::auto_traced,
                                 .host_fraction = 1.0,
                                 .device_limit = int64_t(1) << 30,
                                 .chunk_bytes = 4};
  ShardedOptimizer zero(
      net.named, groups, sgd, comm,
      ZeroOptions{
          .stage = 3,
          .stage3 = {.live_params = 2, .prefetch = 0, .poison = true, .placement = placement}});
  const auto window = zero.gather_window();
  Stage3Params& s3 = *zero.stage3();
  // The warm-up step: every chunk stays home, then each gets a device copy.
  Generator gen(3);
  autograd::backward({net.loss(randn({3, 5}, {}, &gen))});
  zero.finish_gradient_sync();
  zero.zero_grad();
  // A rank whose shard is all padding (4 ranks: shards are aligned) holds no chunk.
  const Stage3Placement placed = s3.placement();
  const bool holds = !zero.plan().groups[0].pieces(comm->rank()).empty();
  RANK_CHECK(placed.placed && (placed.chunks > 0) == holds && placed.device_chunks == placed.chunks,
             what, ": expected a device copy of each of the ", placed.chunks, " chunks, got ",
             placed.device_chunks);

  const auto release_w1 = [&] {  // live 2: reading b1 and w2 releases w1
    (void)net.b1().data_ptr();
    (void)net.w2().data_ptr();
    RANK_CHECK(net.w1().storage()->released(), what, ": expected w1 released");
  };
  {
    autograd::NoGradGuard no_grad;
    net.w1().fill_(0.5);
  }
  const int64_t written = s3.stats().written_back;
  release_w1();
  RANK_CHECK(s3.stats().written_back == written + 1, what, ": w1's write was not kept");
  // Gathered from the device copies.
  check_equal(net.w1(), full({7, 5}, 0.5), 0.0, what + " w1 read from the copies");
  release_w1();
  const int64_t evictions = s3.stats().chunk_evictions;
  s3.evict_copies();
  RANK_CHECK(s3.placement().device_chunks == 0, what, ": ", s3.placement().device_chunks,
             " chunks still on the device after evict_copies()");
  RANK_CHECK(s3.stats().chunk_evictions - evictions == placed.chunks, what, ": evicted ",
             s3.stats().chunk_evictions - evictions, " copies, expected ", placed.chunks);
  // Gathered from the homes.
  check_equal(net.w1(), full({7, 5}, 0.5), 0.0, what + " w1 read from the homes");
  check_equal(net.b1(), net.originals[1], 0.0, what + " b1 read from the homes");
  check_equal(net.w2(), net.originals[2], 0.0, what + " w2 read from the homes");
  zero.finish_gradient_sync();
}

// A gather is a collective: a read of a released parameter on one rank alone, outside any gather
// window, fails there at once naming the parameter (it used to start a gather the other ranks
// never joined, and wait for them until the watchdog). Inside a window every rank reads.
void check_read_outside_window(const std::shared_ptr<Communicator>& comm) {
  const std::string what = "a read outside a gather window";
  Net net(DType::f32);
  auto zero = stage3(net, comm);
  if (comm->rank() == 0) {
    std::string message;
    try {
      (void)net.w2().data_ptr();
    } catch (const ValueError& e) {
      message = e.what();
    }
    RANK_CHECK(message.find("parameter 'w2' is released by ZeRO stage 3 and was read outside a "
                            "gather window") != std::string::npos,
               what, " must fail at once naming the parameter, got '", message, "'");
    RANK_CHECK(net.w2().storage()->released(), what, ": w2 was gathered");
  }
  comm->barrier()->wait();
  const auto window = zero->gather_window();
  check_equal(net.w2(), net.originals[2], 0.0, what + ": w2 read inside a window");
  zero->finish_gradient_sync();
}

// The same number on every rank, or a failed check naming what differs.
void check_same_on_ranks(Communicator& comm, int64_t value, const std::string& what) {
  Tensor lo = from_vector<int64_t>({value}, {1}), hi = lo.clone();
  comm.all_reduce(lo, ReduceOp::min)->wait();
  comm.all_reduce(hi, ReduceOp::max)->wait();
  RANK_CHECK(lo.data<int64_t>()[0] == hi.data<int64_t>()[0], what, ": ranks differ (",
             lo.data<int64_t>()[0], " to ", hi.data<int64_t>()[0], ")");
}

// auto placement decides from the data group's highest warm-up peak: a limit that only the last
// rank's warm-up overran fails on every rank with the same message (it used to fail on that rank
// alone, leaving the others to wait for it in their next collective).
void check_auto_budget_agreed(const std::shared_ptr<Communicator>& comm) {
  const std::string what = "auto placement's budget";
  Net net(DType::f32);
  const nlohmann::json sgd = {{"type", "sgd"}, {"lr", 0.1}};
  std::vector<optim::ParamGroup> groups = {optim::ParamGroup{.params = {}}};
  for (const auto& [name, t] : net.named) groups[0].params.push_back(t);
  const int64_t limit = int64_t(32) << 20;
  const ParamPlacement placement{.policy = PlacementPolicy::auto_traced,
                                 .host_fraction = 1.0,
                                 .device_limit = limit,
                                 .chunk_bytes = 4};
  ShardedOptimizer zero(
      net.named, groups, sgd, comm,
      ZeroOptions{
          .stage = 3,
          .stage3 = {.live_params = 2, .prefetch = 0, .poison = true, .placement = placement}});
  const auto window = zero.gather_window();
  Generator gen(3);
  {
    // 64 MiB held through the warm-up step on the last rank only.
    Tensor ballast;
    if (comm->rank() == comm->size() - 1) ballast = zeros({int64_t(16) << 20});
    autograd::backward({net.loss(randn({3, 5}, {}, &gen))});
  }
  std::string message;
  try {
    zero.finish_gradient_sync();  // ends the warm-up: the placement is decided here
  } catch (const ValueError& e) {
    message = e.what();
  }
  RANK_CHECK(message.find(str_cat("zero.device_memory_limit is ", limit,
                                  " bytes, but the first step used ")) != std::string::npos,
             what, ": every rank must refuse the limit, got '", message, "'");
  // The same words on every rank, after the "rank N: " each message starts with.
  const std::string words = message.substr(std::min(message.size(), message.find("[zero]")));
  check_same_on_ranks(*comm, int64_t(std::hash<std::string>()(words) >> 1),
                      what + ": the refusal's message");
}

void check_gone(const std::shared_ptr<Communicator>& comm) {
  Net net(DType::f32);
  stage3(net, comm).reset();
  bool threw = false;
  try {
    (void)net.b1().data_ptr();
  } catch (const ValueError& e) {
    threw = std::string(e.what()).find(
                "'b1' is released by ZeRO stage 3, whose optimizer is gone") != std::string::npos;
  }
  RANK_CHECK(threw, "a parameter read after its optimizer is gone must fail naming it");
}

}  // namespace
}  // namespace tessera::parallel::zero

using namespace tessera;
using namespace tessera::parallel;

int main(int argc, char** argv) {
  return run_distributed(argc, argv, [](const std::shared_ptr<Communicator>& world) {
    for (DType dtype : {DType::f32, DType::bf16}) zero::check_release_and_gather(dtype, world);
    zero::check_backward_and_order(world);
    for (DType dtype : {DType::f32, DType::bf16}) zero::check_writes_and_update(dtype, world);
    zero::check_write_back_with_copies(world);
    zero::check_read_outside_window(world);
    zero::check_auto_budget_agreed(world);
    zero::check_gone(world);
    world->barrier()->wait();
    if (world->rank() == 0)
      std::printf("zero stage 3: all checks passed on %d ranks (%lld checks on rank 0)\n",
                  world->size(), static_cast<long long>(testing::checks_passed()));
    return 0;
  });
}

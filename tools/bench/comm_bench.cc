// `comm_bench` (tessera bench comm): per collective and message size, time, algorithm bandwidth
// and bus bandwidth with the nccl-tests definitions; then data-parallel scaling of a GPT training
// step (forward, backward with bucketed all-reduce, AdamW) on 1 rank and on all ranks.
// Run: mpirun -np 2 comm_bench [--min-bytes 1024] [--max-bytes 268435456] [--model gpt2-124m]
//      [--batch 2] [--seq 64] [--steps 3] [--threads N] [--skip-collectives] [--skip-dp]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "autograd/engine.h"
#include "core/factory.h"
#include "core/parallel.h"
#include "models/gpt/gpt.h"
#include "optim/adam.h"
#include "parallel/comm/mpi_runtime.h"
#include "parallel/data/data_parallel.h"
#include "tools/bench/system_info.h"
#include "tools/bench/table.h"

namespace tessera::bench {
namespace {

using parallel::CommKind;
using parallel::Communicator;

struct Args {
  int64_t min_bytes = 1024;
  int64_t max_bytes = int64_t(256) << 20;
  std::string model = "gpt2-124m";
  int64_t batch = 2;  // sequences per rank per step
  int64_t seq = 64;
  int steps = 3;
  int threads = 0;  // 0: the cores divided among the ranks
  bool collectives = true;
  bool dp = true;
};

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> std::string {
      TS_CHECK(i + 1 < argc, "comm_bench", "expected a value after ", flag);
      return argv[++i];
    };
    if (flag == "--min-bytes")
      a.min_bytes = std::stoll(value());
    else if (flag == "--max-bytes")
      a.max_bytes = std::stoll(value());
    else if (flag == "--model")
      a.model = value();
    else if (flag == "--batch")
      a.batch = std::stoll(value());
    else if (flag == "--seq")
      a.seq = std::stoll(value());
    else if (flag == "--steps")
      a.steps = std::stoi(value());
    else if (flag == "--threads")
      a.threads = std::stoi(value());
    else if (flag == "--skip-collectives")
      a.collectives = false;
    else if (flag == "--skip-dp")
      a.dp = false;
    else
      TS_FAIL("comm_bench", "expected a known flag (see the top of comm_bench.cc), got ", flag);
  }
  TS_CHECK(a.min_bytes >= 4 && a.min_bytes <= a.max_bytes, "comm_bench",
           "expected 4 <= --min-bytes <= --max-bytes, got ", a.min_bytes, " and ", a.max_bytes);
  TS_CHECK(a.batch > 0 && a.seq > 0 && a.steps > 0, "comm_bench",
           "expected positive --batch, --seq and --steps");
  return a;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The slowest rank's value: a collective is as fast as its last rank.
double max_over_ranks(Communicator& comm, double v) {
  Tensor t = from_vector<double>({v}, {1});
  comm.all_reduce(t, parallel::ReduceOp::max)->wait();
  return t.item();
}

std::string human_bytes(int64_t b) {
  if (b >= (int64_t(1) << 20)) return format_number(double(b) / (1 << 20), 0) + " MB";
  if (b >= 1024) return format_number(double(b) / 1024, 0) + " KB";
  return str_cat(b, " B");
}

// nccl-tests' bus bandwidth factor: what each rank's link carries relative to the message.
double bus_factor(CommKind kind, int n) {
  switch (kind) {
    case CommKind::all_reduce:
      return 2.0 * (n - 1) / n;
    case CommKind::broadcast:
      return 1.0;
    default:
      return double(n - 1) / n;  // all_gather, reduce_scatter, all_to_all
  }
}

// One call of `kind` on a message of `bytes` (nccl-tests' size: all_gather's output,
// reduce_scatter's and all_to_all's input), f32 elements, started and waited for.
std::function<void()> make_call(Communicator& comm, CommKind kind, int64_t bytes) {
  const int n = comm.size();
  const int64_t numel = std::max<int64_t>(n, (bytes / 4) / n * n);  // a multiple of n
  Tensor full_t = ones({numel});
  Tensor part = ones({numel / n});
  Tensor out = empty({numel});
  switch (kind) {
    case CommKind::all_reduce:
      return [&comm, full_t] { comm.all_reduce(full_t)->wait(); };
    case CommKind::all_gather:
      return [&comm, part, full_t] { comm.all_gather(part, full_t)->wait(); };
    case CommKind::reduce_scatter:
      return [&comm, full_t, part] { comm.reduce_scatter(full_t, part)->wait(); };
    case CommKind::broadcast:
      return [&comm, full_t] { comm.broadcast(full_t, 0)->wait(); };
    default:
      return [&comm, full_t, out] { comm.all_to_all(full_t, out)->wait(); };
  }
}

void bench_collectives(Communicator& comm, const Args& args) {
  const int n = comm.size();
  const std::vector<CommKind> kinds{CommKind::all_reduce, CommKind::all_gather,
                                    CommKind::reduce_scatter, CommKind::broadcast,
                                    CommKind::all_to_all};
  Table table({"collective", "size", "time (us)", "algbw (GB/s)", "busbw (GB/s)"});
  for (size_t c = 1; c < 5; ++c) table.align_right(c);
  for (CommKind kind : kinds) {
    for (int64_t bytes = args.min_bytes; bytes <= args.max_bytes; bytes *= 4) {
      std::function<void()> call = make_call(comm, kind, bytes);
      // About 64 MB of traffic per size, 3 to 50 timed calls, after 2 warm-up calls.
      const int iters = int(std::clamp<int64_t>((int64_t(64) << 20) / bytes, 3, 50));
      call();
      call();
      comm.barrier()->wait();
      const double start = now_s();
      for (int i = 0; i < iters; ++i) call();
      const double t = max_over_ranks(comm, (now_s() - start) / iters);
      const double algbw = double(bytes) / t / 1e9;
      table.add_row({parallel::comm_kind_name(kind), human_bytes(bytes), format_number(t * 1e6, 1),
                     format_number(algbw, 2), format_number(algbw * bus_factor(kind, n), 2)});
    }
  }
  if (comm.rank() == 0) {
    std::printf(
        "\n## Collectives (MPI backend, f32, %d ranks; time is the slowest rank's mean)\n\n%s\n", n,
        table.render().c_str());
  }
}

struct StepResult {
  double step_s = 0;            // median over the timed steps, slowest rank
  int64_t allreduce_bytes = 0;  // payload all-reduced per step
  int64_t allreduce_calls = 0;
  size_t buckets = 0;
  int64_t done_in_backward = 0;  // buckets whose all-reduce completed before finish_gradient_sync
};

// Trains the model data-parallel over `comm` for 1 + steps steps; times the last `steps`.
StepResult time_dp_steps(const std::shared_ptr<Communicator>& comm, const gpt::GPTConfig& config,
                         const Args& args) {
  Generator init(1234 + uint64_t(comm->rank()));
  gpt::GPT model(config, init);
  parallel::DataParallel dp(model.named_parameters(), comm, {.record_events = true});
  optim::AdamW opt(model.parameters(), optim::AdamWOptions{.lr = 1e-4});
  Generator data(99 + uint64_t(comm->rank()));
  StepResult r;
  r.buckets = dp.num_buckets();
  std::vector<double> times;
  for (int step = 0; step <= args.steps; ++step) {
    Tensor ids =
        randint(0, config.vocab_size, {args.batch, args.seq + 1}, {.dtype = DType::i64}, &data);
    Tensor x = ids.narrow(1, 0, args.seq).contiguous();  // (B, T)
    Tensor y = ids.narrow(1, 1, args.seq).contiguous();  // (B, T)
    comm->barrier()->wait();
    comm->reset_stats();
    const double start = now_s();
    opt.zero_grad();
    autograd::backward({model.loss(x, y)});
    int64_t done = 0;
    for (const parallel::SyncEvent& e : dp.events()) {
      done += e.kind == parallel::SyncEvent::Kind::bucket_completed;
    }
    dp.clear_events();
    dp.finish_gradient_sync();
    opt.step();
    const double local_s = now_s() - start;
    const parallel::CommCounter ar = comm->stats()[CommKind::all_reduce];
    r.allreduce_bytes = ar.payload_bytes;
    r.allreduce_calls = ar.calls;
    r.done_in_backward = done;
    const double t = max_over_ranks(*comm, local_s);
    if (step > 0) times.push_back(t);  // step 0 warms up allocations and packing buffers
  }
  std::sort(times.begin(), times.end());
  r.step_s = times[times.size() / 2];
  return r;
}

void bench_data_parallel(const std::shared_ptr<Communicator>& world, const Args& args) {
  const gpt::GPTConfig config = gpt::gpt_preset(args.model);
  const int n = world->size();
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = args.threads > 0 ? args.threads : std::max(1, cores / n);
  set_num_threads(threads);

  // 1 rank: rank 0 alone (the others wait at the barrier inside), then every rank.
  std::vector<int> sizes{1};
  if (n > 1) sizes.push_back(n);
  Table table({"ranks", "threads/rank", "global batch", "step (s)", "tokens/s", "speedup",
               "all-reduce per step", "buckets", "reduced in backward"});
  for (size_t c = 0; c < 9; ++c) table.align_right(c);
  double base_tokens_s = 0;
  for (int size : sizes) {
    auto group = world->split(world->rank() < size ? 0 : -1, world->rank(), str_cat("dp", size));
    StepResult r;
    if (group) r = time_dp_steps(group, config, args);
    world->barrier()->wait();
    if (world->rank() != 0) continue;
    const double tokens_s = double(size * args.batch * args.seq) / r.step_s;
    if (size == 1) base_tokens_s = tokens_s;
    table.add_row({std::to_string(size), std::to_string(threads),
                   str_cat(size * args.batch, " x ", args.seq), format_number(r.step_s, 2),
                   format_number(tokens_s, 1), format_number(tokens_s / base_tokens_s, 2),
                   str_cat(human_bytes(r.allreduce_bytes), " in ", r.allreduce_calls, " calls"),
                   std::to_string(r.buckets), std::to_string(r.done_in_backward)});
  }
  if (world->rank() == 0) {
    std::printf(
        "\n## Data-parallel %s training step (%lld parameters, AdamW, f32, %lld sequences "
        "of %lld tokens per rank, median of %d steps)\n\n%s\n",
        args.model.c_str(), static_cast<long long>(gpt::gpt_num_parameters(config)),
        static_cast<long long>(args.batch), static_cast<long long>(args.seq), args.steps,
        table.render().c_str());
  }
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) {
  using namespace tessera;
  return parallel::run_distributed(
      argc, argv, [&](const std::shared_ptr<parallel::Communicator>& world) {
        const bench::Args args = bench::parse_args(argc, argv);
        if (world->rank() == 0) {
          std::printf("# tessera bench comm: %d ranks, %s, %u hardware threads, load %s\n",
                      world->size(), bench::cpu_model().c_str(),
                      std::thread::hardware_concurrency(), bench::load_average().c_str());
        }
        if (args.collectives) bench::bench_collectives(*world, args);
        if (args.dp) bench::bench_data_parallel(world, args);
        return 0;
      });
}

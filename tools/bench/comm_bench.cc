// `bench comm` (tessera bench comm, under mpirun): per collective and message size, Tessera's
// time beside the plain MPI call's (comm_collectives.cc); then data-parallel scaling of a GPT
// training step (forward, backward with bucketed all-reduce, AdamW) on rank 0 alone and on all
// ranks, in one run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "autograd/engine.h"
#include "core/factory.h"
#include "core/parallel.h"
#include "models/gpt/gpt.h"
#include "optim/adam.h"
#include "parallel/comm/mpi_runtime.h"
#include "parallel/data/data_parallel.h"
#include "kernels/cpu/gemm.h"
#include "tools/bench/bench_args.h"
#include "tools/bench/comm_collectives.h"
#include "tools/bench/commands.h"
#include "tools/bench/system_info.h"
#include "tools/bench/table.h"

namespace tessera::bench {

const char* const kCommUsage =
    "usage: mpirun -np N bench comm [--min-bytes SIZE] [--max-bytes SIZE] [--model PRESET]\n"
    "                  [--rounds N] [--batch B] [--seq T] [--steps N] [--threads N]\n"
    "                  [--skip-collectives] [--skip-dp]\n"
    "  Collectives (MPI backend, f32) per message size beside the plain MPI call of the same kind\n"
    "  and size: time, ratio, algbw and busbw as nccl-tests defines them; then a data-parallel\n"
    "  GPT training step on rank 0 alone and on all N ranks (speed-up). Rank 0 prints.\n"
    "  --min-bytes SIZE  smallest message (default 1K); sizes grow 4x per row\n"
    "  --max-bytes SIZE  largest message (default 256M; K, M, G suffixes are powers of 1024)\n"
    "  --rounds N        timed batches per collective, size and side; the median (default 7)\n"
    "  --model PRESET    data-parallel model (default gpt2-124m; gpt-tiny for quick runs)\n"
    "  --batch B         sequences per rank per step (default 2)\n"
    "  --seq T           tokens per sequence (default 64)\n"
    "  --steps N         timed steps after one warm-up step; the median is reported (default 3)\n"
    "  --threads N       CPU threads per rank (default: the cores divided among the ranks)\n"
    "  --skip-collectives, --skip-dp  leave a section out\n";

namespace {

using parallel::CommKind;
using parallel::Communicator;

struct Args {
  int64_t min_bytes = 1024;
  int64_t max_bytes = int64_t(256) << 20;
  int rounds = 7;
  std::string model = "gpt2-124m";
  int64_t batch = 2;  // sequences per rank per step
  int64_t seq = 64;
  int steps = 3;
  int threads = 0;  // 0: the cores divided among the ranks
  bool collectives = true;
  bool dp = true;
};

Args parse_args(const std::vector<std::string>& argv) {
  Args a;
  ArgCursor args(argv);
  while (args.next()) {
    const std::string& flag = args.flag();
    if (flag == "--min-bytes")
      a.min_bytes = parse_bytes(flag, args.value());
    else if (flag == "--max-bytes")
      a.max_bytes = parse_bytes(flag, args.value());
    else if (flag == "--rounds")
      a.rounds = int(parse_int(flag, args.value(), 1, 1000));
    else if (flag == "--model")
      a.model = args.value();
    else if (flag == "--batch")
      a.batch = parse_int(flag, args.value(), 1, 1 << 20);
    else if (flag == "--seq")
      a.seq = parse_int(flag, args.value(), 1, 1 << 24);
    else if (flag == "--steps")
      a.steps = int(parse_int(flag, args.value(), 1, 1000));
    else if (flag == "--threads")
      a.threads = int(parse_int(flag, args.value(), 1, 4096));
    else if (flag == "--skip-collectives")
      a.collectives = false;
    else if (flag == "--skip-dp")
      a.dp = false;
    else
      throw UsageError("expected an option of bench comm, got '" + flag + "'");
  }
  if (a.min_bytes < 4 || a.min_bytes > a.max_bytes) {
    throw UsageError("expected 4 <= --min-bytes <= --max-bytes, got " +
                     std::to_string(a.min_bytes) + " and " + std::to_string(a.max_bytes));
  }
  return a;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The slowest rank's value: a training step is as fast as its last rank.
double max_over_ranks(Communicator& comm, double v) {
  Tensor t = from_vector<double>({v}, {1});
  comm.all_reduce(t, parallel::ReduceOp::max)->wait();
  return t.item();
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
  parallel::DataParallelOptions dp_options;
  dp_options.record_events = true;
  parallel::DataParallel dp(model.named_parameters(), comm, dp_options);
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

int run_comm_command(int argc, char** argv, int first) {
  const std::optional<Args> parsed = parse_on_every_rank(parse_args, argc, argv, first);
  if (!parsed) return 2;
  const Args& args = *parsed;
  return parallel::run_distributed(
      argc, argv, [&](const std::shared_ptr<parallel::Communicator>& world) {
        if (world->rank() == 0) {
          std::printf(
              "# tessera bench comm: %d ranks, %s, GEMM ISA %s, %u hardware threads, load "
              "average %s\n",
              world->size(), cpu_model().c_str(), kernels::cpu::sgemm_isa(),
              std::thread::hardware_concurrency(), load_average().c_str());
        }
        if (args.collectives) {
          bench_collectives(*world, {.min_bytes = args.min_bytes,
                                     .max_bytes = args.max_bytes,
                                     .rounds = args.rounds});
          if (world->rank() == 0) std::printf("load average after: %s\n", load_average().c_str());
        }
        if (args.dp) bench_data_parallel(world, args);
        return 0;
      });
}

}  // namespace tessera::bench

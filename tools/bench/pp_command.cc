// `bench pp` (tessera bench pp, under mpirun): pipeline parallelism over the job's P ranks, one
// row per schedule (gpipe, 1f1b, interleaved, zero_bubble) and number of micro-batches: a small
// GPT cut into P (x v) stages, steps run through the pipeline executor, the measured idle (bubble)
// fraction from the executor's action timings beside the theory's and the simulator's given the
// measured action costs, the step time against 1f1b's and the activation memory per rank by the
// allocator's counters.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/factory.h"
#include "core/parallel.h"
#include "parallel/comm/mpi_runtime.h"
#include "parallel/pipeline/partition.h"
#include "parallel/pipeline/schedule.h"
#include "tools/bench/bench_args.h"
#include "tools/bench/commands.h"
#include "tools/bench/pp_bench.h"
#include "tools/bench/pp_plan.h"
#include "tools/bench/system_info.h"
#include "tools/bench/table.h"

namespace tessera::bench {

const char* const kPpUsage =
    "usage: mpirun -np P bench pp [--stages P] [--blocks L] [--width C] [--heads H] [--seq T]\n"
    "                  [--micro B] [--vocab V] [--micro-batches M,...] [--schedules S,...]\n"
    "                  [--virtual V] [--warmup N] [--steps N] [--threads N]\n"
    "  Pipeline parallelism over the P ranks (P >= 2, every rank a stage), one row per schedule\n"
    "  and number of micro-batches M: a small GPT cut into P stages (P x V for interleaved),\n"
    "  training steps through the pipeline executor; the measured idle (bubble) fraction (1 -\n"
    "  compute time / step time, mean and max over ranks) beside the theory's and the\n"
    "  simulator's given the measured F, B, W costs, the step time against 1f1b's, the\n"
    "  activation memory per rank (allocator peak over the step). Medians over the measured\n"
    "  steps. Rank 0 prints.\n"
    "  --stages P         pipeline stages; must equal the number of ranks (the default)\n"
    "  --blocks L         transformer blocks (default 8; at least P x V for interleaved)\n"
    "  --width C          d_model (default 128)\n"
    "  --heads H          attention heads (default 4)\n"
    "  --seq T            tokens per sequence (default 64)\n"
    "  --micro B          sequences per micro-batch (default 2)\n"
    "  --vocab V          vocabulary (default 256)\n"
    "  --micro-batches M  micro-batches per step, a list (default 8,16)\n"
    "  --schedules S      a list of gpipe, 1f1b, interleaved, zero_bubble (default all four)\n"
    "  --virtual V        model chunks per rank of the interleaved schedule (default 2)\n"
    "  --warmup N         untimed steps first (default 2)\n"
    "  --steps N          measured steps; medians are reported (default 10)\n"
    "  --threads N        CPU threads per rank (default: the cores divided among the ranks)\n";

namespace {

namespace pp = parallel::pipeline;
using parallel::Communicator;

struct Args {
  PpShape shape;
  int stages = 0;  // 0: the world size
  std::vector<int> micro_batches{8, 16};
  std::vector<pp::ScheduleKind> schedules{pp::ScheduleKind::gpipe, pp::ScheduleKind::one_f_one_b,
                                          pp::ScheduleKind::interleaved,
                                          pp::ScheduleKind::zero_bubble};
  int virtual_stages = 2;
  int threads = 0;  // 0: the cores divided among the ranks
};

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    items.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return items;
}

Args parse_args(const std::vector<std::string>& argv) {
  Args a;
  ArgCursor args(argv);
  while (args.next()) {
    const std::string& flag = args.flag();
    if (flag == "--stages") {
      a.stages = int(parse_int(flag, args.value(), 1, 4096));
    } else if (flag == "--blocks") {
      a.shape.blocks = parse_int(flag, args.value(), 1, 1024);
    } else if (flag == "--width") {
      a.shape.width = parse_int(flag, args.value(), 1, 1 << 16);
    } else if (flag == "--heads") {
      a.shape.heads = parse_int(flag, args.value(), 1, 1024);
    } else if (flag == "--seq") {
      a.shape.seq = parse_int(flag, args.value(), 1, 1 << 16);
    } else if (flag == "--micro") {
      a.shape.micro = parse_int(flag, args.value(), 1, 1 << 16);
    } else if (flag == "--vocab") {
      a.shape.vocab = parse_int(flag, args.value(), 2, 1 << 22);
    } else if (flag == "--micro-batches") {
      a.micro_batches.clear();
      for (const std::string& m : split_list(args.value()))
        a.micro_batches.push_back(int(parse_int(flag, m, 1, 4096)));
    } else if (flag == "--schedules") {
      a.schedules.clear();
      for (const std::string& s : split_list(args.value())) {
        try {
          a.schedules.push_back(pp::schedule_kind(s));
        } catch (const ValueError& e) {
          throw UsageError(str_cat("expected --schedules to list schedules: ", e.what()));
        }
      }
    } else if (flag == "--virtual") {
      a.virtual_stages = int(parse_int(flag, args.value(), 2, 64));
    } else if (flag == "--warmup") {
      a.shape.warmup = int(parse_int(flag, args.value(), 0, 1000));
    } else if (flag == "--steps") {
      a.shape.steps = int(parse_int(flag, args.value(), 1, 1000));
    } else if (flag == "--threads") {
      a.threads = int(parse_int(flag, args.value(), 1, 4096));
    } else {
      throw UsageError("expected an option of bench pp, got '" + flag + "'");
    }
  }
  if (a.shape.width % a.shape.heads != 0) {
    throw UsageError(str_cat("expected --width divisible by --heads, got ", a.shape.width, " and ",
                             a.shape.heads));
  }
  return a;
}

// Fields of a StepRecord all-gathered (i64: seconds as nanoseconds, bytes exact).
constexpr size_t kFields = 2 + 2 * kNumComputeKinds;
int64_t to_ns(double seconds) { return int64_t(seconds * 1e9 + 0.5); }
double from_ns(int64_t ns) { return double(ns) * 1e-9; }

std::vector<int64_t> pack(const std::vector<StepRecord>& steps) {
  std::vector<int64_t> out;
  for (const StepRecord& r : steps) {
    out.push_back(to_ns(r.wall));
    out.push_back(r.activation_bytes);
    for (int k = 0; k < kNumComputeKinds; ++k) {
      out.push_back(to_ns(r.seconds[size_t(k)]));
      out.push_back(r.actions[size_t(k)]);
    }
  }
  return out;
}

// Every rank's measured steps, records[rank][step] (on every rank).
std::vector<std::vector<StepRecord>> gather_records(Communicator& world,
                                                    const std::vector<StepRecord>& mine) {
  const std::vector<int64_t> flat = pack(mine);
  const int64_t k = int64_t(flat.size());
  Tensor out = empty({k * world.size()}, {.dtype = DType::i64});
  world.all_gather(from_vector<int64_t>(flat, {k}), out)->wait();
  const int64_t* v = out.data<int64_t>();
  std::vector<std::vector<StepRecord>> records(size_t(world.size()));
  for (auto& rank : records) {
    for (size_t i = 0; i < mine.size(); ++i, v += kFields) {
      StepRecord r;
      r.wall = from_ns(v[0]);
      r.activation_bytes = v[1];
      for (int j = 0; j < kNumComputeKinds; ++j) {
        r.seconds[size_t(j)] = from_ns(v[2 + 2 * j]);
        r.actions[size_t(j)] = v[3 + 2 * j];
      }
      rank.push_back(r);
    }
  }
  return records;
}

std::string ms(double seconds) { return format_number(seconds * 1e3, 2); }
std::string fraction(double f) { return format_number(f, 3); }

template <typename T, typename F>
std::string join(const std::vector<T>& values, const F& cell) {
  std::string out;
  for (const T& v : values) out += (out.empty() ? "" : " / ") + cell(v);
  return out;
}

// Why `spec` cannot be measured with these arguments ("" when it can).
std::string unavailable(const pp::ScheduleSpec& spec, int64_t blocks) {
  if (spec.kind == pp::ScheduleKind::interleaved && spec.micro_batches % spec.stages != 0)
    return str_cat("needs M divisible by P=", spec.stages);
  if (int64_t(spec.stages) * spec.virtual_stages > blocks)
    return str_cat("needs --blocks >= ", spec.stages * spec.virtual_stages);
  return "";
}

// Ranks on this host: Open MPI's local size, else every rank.
int local_ranks(int ranks) {
  const char* env = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const int local = env ? std::atoi(env) : 0;
  return local > 0 ? local : ranks;
}

struct Row {
  pp::ScheduleSpec spec;
  std::string why;  // not measured: the reason
  PpSummary m;
  pp::SimulationResult sim;
  double theory = 0;
};

std::string blocks_per_stage(int64_t blocks, int stages) {
  std::string out;
  for (const pp::BlockRange& r : pp::partition_blocks(pp::PartitionSpec{}, blocks, stages))
    out += str_cat(out.empty() ? "" : "+", r.size());
  return out;
}

// A row's cells; `rows` gives 1f1b's step at the same M.
std::vector<std::string> row_cells(const Row& row, const std::vector<Row>& rows) {
  const pp::ScheduleSpec& s = row.spec;
  std::vector<std::string> cells{pp::schedule_name(s.kind), std::to_string(s.virtual_stages),
                                 std::to_string(s.micro_batches)};
  if (!row.why.empty()) {
    cells.push_back(row.why);
    cells.resize(13, "-");
    return cells;
  }
  std::string vs = "-";
  for (const Row& ref : rows) {
    if (ref.spec.kind == pp::ScheduleKind::one_f_one_b &&
        ref.spec.micro_batches == s.micro_batches && ref.why.empty())
      vs = format_number(row.m.step_seconds / ref.m.step_seconds, 2);
  }
  double sim_bubble = 0;
  for (double b : row.sim.bubble_fraction) sim_bubble += b;
  sim_bubble /= double(row.sim.bubble_fraction.size());
  const pp::SimulationCosts& c = row.m.costs;
  const bool split = s.kind == pp::ScheduleKind::zero_bubble;
  const std::string fbw = ms(c.forward) + " / " + ms(split ? c.backward_input : c.backward) +
                          " / " + (split ? ms(c.backward_weight) : "-");
  cells.insert(cells.end(),
               {ms(row.m.step_seconds), vs, fraction(row.m.bubble_mean), fraction(row.m.bubble_max),
                fraction(row.theory), fraction(sim_bubble), ms(row.sim.makespan), fbw,
                join(row.m.activation_bytes,
                     [](int64_t b) { return format_number(double(b) / (1 << 20), 2); }),
                join(row.sim.peak_in_flight, [](int n) { return std::to_string(n); })});
  return cells;
}

void print_notes(const Args& a, int p) {
  const PpShape& sh = a.shape;
  std::printf(
      "- step: the slowest rank's wall time for one step (every rank starts after a barrier), "
      "median of %d steps after %d warm-up; vs 1f1b: its ratio to 1f1b's at the same M.\n"
      "- bubble mean / max: rank r's idle fraction 1 - (its forward, backward, B and W action "
      "time) / step, the mean and the largest over the ranks (medians over the steps); sends, "
      "receives and waits are idle. theory: theoretical_bubble, (P-1)/(M+P-1) for gpipe and "
      "1f1b, that over v for interleaved, the simulator's under unit costs for zero_bubble. "
      "simulated: simulate() with F, B, W set to the measured mean action times (one cost per "
      "kind for every stage, transfers free), mean over ranks; sim step: its makespan.\n"
      "- F / B / W: mean forward, backward (zero_bubble: input-gradient B) and weight-gradient W "
      "action times over every rank (interleaved: per chunk of 1/v the blocks). Stage 0 also "
      "embeds, the last stage also runs the head and loss.\n"
      "- activations per rank: the allocator's peak during the step minus the bytes held before "
      "it (largest over the steps; gradients, held from the warm-up on, are not counted), ranks "
      "0..P-1; in flight (sim): the most micro-batch chunks each rank holds forwarded and not "
      "yet backpropagated, by the simulator. zero_bubble's activations also hold what its "
      "deferred Ws keep until they run (the W queue, which the in-flight count leaves out).\n",
      sh.steps, sh.warmup);
  if (p <= sh.blocks) {
    std::printf("- blocks per stage (uniform partition, global stage order): v=1 %s",
                blocks_per_stage(sh.blocks, p).c_str());
    if (int64_t(p) * a.virtual_stages <= sh.blocks)
      std::printf(", v=%d %s", a.virtual_stages,
                  blocks_per_stage(sh.blocks, p * a.virtual_stages).c_str());
    std::printf(".\n");
  }
  const int cores = int(std::thread::hardware_concurrency());
  const int local = local_ranks(p);
  if (cores > 0 && local > cores) {
    std::printf(
        "- this host runs %d ranks on %d hardware threads: the ranks time-share the cores, so an "
        "action's wall time includes waiting for a core (F, B, W grow when ranks compute at once, "
        "and a rank polling for a receive slows those computing). The measured fractions mix the "
        "schedule's bubble with that sharing: compare the schedules within one run, and the "
        "simulator's figures for the schedule alone.\n",
        local, cores);
  }
}

void print_table(const std::vector<Row>& rows, const Args& a, int p, int threads) {
  Table table({"schedule", "v", "M", "step (ms)", "vs 1f1b", "bubble mean", "bubble max", "theory",
               "simulated", "sim step (ms)", "F / B / W (ms)", "activations per rank (MB)",
               "in flight (sim)"});
  for (size_t c = 1; c < 11; ++c) table.align_right(c);
  for (const Row& row : rows) table.add_row(row_cells(row, rows));
  const PpShape& sh = a.shape;
  std::printf(
      "\n## Pipeline schedules, GPT (%lld blocks, C=%lld, %lld heads, vocabulary %lld), "
      "micro-batch %lld x %lld tokens; P=%d stages, %d threads per rank\n\n%s\n",
      static_cast<long long>(sh.blocks), static_cast<long long>(sh.width),
      static_cast<long long>(sh.heads), static_cast<long long>(sh.vocab),
      static_cast<long long>(sh.micro), static_cast<long long>(sh.seq), p, threads,
      table.render().c_str());
  print_notes(a, p);
}

int bench_pp(const std::shared_ptr<Communicator>& world, const Args& a) {
  const int n = world->size();
  const int p = a.stages > 0 ? a.stages : n;
  // Impossible layouts end every rank alike, before any collective, with the numbers named.
  TS_CHECK(n >= 2, "bench pp", "expected at least 2 ranks (mpirun -np P bench pp), got ", n);
  TS_CHECK(p == n, "bench pp", "expected --stages ", p, " to equal the number of ranks ", n,
           ": bench pp runs one pipeline of P = ranks stages (no data or tensor parallelism)");
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = a.threads > 0 ? a.threads : std::max(1, cores / n);
  set_num_threads(threads);
  if (world->rank() == 0) {
    std::printf("# tessera bench pp: %d ranks, %s, %u hardware threads, load average %s\n", n,
                cpu_model().c_str(), std::thread::hardware_concurrency(), load_average().c_str());
    std::fflush(stdout);
  }
  std::vector<Row> rows;
  for (int m : a.micro_batches) {
    for (pp::ScheduleKind kind : a.schedules) {
      Row row;
      row.spec = {.kind = kind,
                  .stages = p,
                  .virtual_stages = kind == pp::ScheduleKind::interleaved ? a.virtual_stages : 1,
                  .micro_batches = m};
      row.why = unavailable(row.spec, a.shape.blocks);
      if (row.why.empty()) {
        row.m = summarize(gather_records(*world, measure_pp(a.shape, row.spec, world)));
        row.sim = pp::simulate(row.spec, row.m.costs);
        row.theory = pp::theoretical_bubble(row.spec);
      }
      rows.push_back(row);
    }
  }
  if (world->rank() == 0) print_table(rows, a, p, threads);
  return 0;
}

}  // namespace

int run_pp_command(int argc, char** argv, int first) {
  const std::optional<Args> parsed = parse_on_every_rank(parse_args, argc, argv, first);
  if (!parsed) return 2;
  const Args& args = *parsed;
  return parallel::run_distributed(argc, argv, [&](const std::shared_ptr<Communicator>& world) {
    return bench_pp(world, args);
  });
}

}  // namespace tessera::bench

// `bench sp` (tessera bench sp, under mpirun): the paper's sequence parallelism over the job's N
// ranks on a small GPT (gpt-mini's shape by default). Table 1: the activation memory per rank of
// one training step (forward + backward) against the sequence length, for one rank, each sequence
// attention mode over N ranks and 1D tensor parallelism over N ranks. Table 2: the longest
// sequence each layout trains under a fixed activation budget per rank (the paper: sequence
// parallelism reaches longer sequences than tensor parallelism).
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"
#include "parallel/comm/mpi_runtime.h"
#include "tools/bench/bench_args.h"
#include "tools/bench/commands.h"
#include "tools/bench/sp_bench.h"
#include "tools/bench/system_info.h"
#include "tools/bench/table.h"

namespace tessera::bench {

const char* const kSpUsage =
    "usage: mpirun -np N bench sp [--seqs T,...] [--modes M,...] [--budget MB] [--start-seq T]\n"
    "                  [--max-seq T] [--refine K] [--blocks L] [--width C] [--heads H]\n"
    "                  [--vocab V] [--micro B] [--threads N]\n"
    "  Sequence parallelism over the N ranks (N >= 2) on a GPT (gpt-mini's shape by default:\n"
    "  4 blocks, C=256, 4 heads, vocabulary 256), dropout off, one training step's forward +\n"
    "  backward (no optimizer). Table 1: activation memory per rank (the allocator's peak during\n"
    "  the step minus the parameters and gradients held before it, busiest rank) against the\n"
    "  sequence length, for one rank, each mode over N ranks and 1D tensor parallelism over N\n"
    "  ranks. Table 2: the longest sequence each layout trains within --budget MB of activations\n"
    "  per rank (doubling from --start-seq, then --refine bisection steps). Rank 0 prints.\n"
    "  --seqs T,...     sequence lengths of table 1 (default 256,512,1024)\n"
    "  --modes M,...    sequence attention modes: ring, all_to_all, ring_flash (default all)\n"
    "  --budget MB      activation budget per rank of table 2 (default 48; 0 skips table 2)\n"
    "  --start-seq T    the search's first length (default 256)\n"
    "  --max-seq T      the search's longest length (default 8192)\n"
    "  --refine K       bisection steps after the doubling (default 2; granularity 16 N)\n"
    "  --blocks L       transformer blocks (default 4)\n"
    "  --width C        d_model (default 256)\n"
    "  --heads H        attention heads (default 4; divisible by N for all_to_all and tp)\n"
    "  --vocab V        vocabulary (default 256; divisible by N for tp)\n"
    "  --micro B        sequences per step (default 1)\n"
    "  --threads N      CPU threads per rank (default: the cores divided among the ranks)\n";

namespace {

using parallel::Communicator;

struct Args {
  std::vector<int64_t> seqs{256, 512, 1024};
  std::vector<std::string> modes{"ring", "all_to_all", "ring_flash"};
  int64_t budget_mb = 48, start_seq = 256, max_seq = 8192;
  int refine = 2;
  gpt::GPTConfig model = gpt::gpt_preset("gpt-mini");
  int64_t micro = 1;
  int threads = 0;
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
  a.model.dropout = a.model.attn_dropout = 0.0;
  ArgCursor args(argv);
  while (args.next()) {
    const std::string& flag = args.flag();
    if (flag == "--seqs") {
      a.seqs.clear();
      for (const std::string& t : split_list(args.value()))
        a.seqs.push_back(parse_int(flag, t, 1, 1 << 20));
    } else if (flag == "--modes") {
      a.modes.clear();
      for (const std::string& m : split_list(args.value())) {
        if (m != "ring" && m != "all_to_all" && m != "ring_flash")
          throw UsageError("expected --modes to list ring, all_to_all or ring_flash, got '" + m +
                           "'");
        a.modes.push_back(m);
      }
    } else if (flag == "--budget") {
      a.budget_mb = parse_int(flag, args.value(), 0, 1 << 20);
    } else if (flag == "--start-seq") {
      a.start_seq = parse_int(flag, args.value(), 1, 1 << 20);
    } else if (flag == "--max-seq") {
      a.max_seq = parse_int(flag, args.value(), 1, 1 << 22);
    } else if (flag == "--refine") {
      a.refine = int(parse_int(flag, args.value(), 0, 20));
    } else if (flag == "--blocks") {
      a.model.n_layers = parse_int(flag, args.value(), 1, 1024);
    } else if (flag == "--width") {
      a.model.d_model = parse_int(flag, args.value(), 1, 1 << 16);
    } else if (flag == "--heads") {
      a.model.n_heads = parse_int(flag, args.value(), 1, 1024);
    } else if (flag == "--vocab") {
      a.model.vocab_size = parse_int(flag, args.value(), 2, 1 << 22);
    } else if (flag == "--micro") {
      a.micro = parse_int(flag, args.value(), 1, 1 << 16);
    } else if (flag == "--threads") {
      a.threads = int(parse_int(flag, args.value(), 1, 4096));
    } else {
      throw UsageError("expected an option of bench sp, got '" + flag + "'");
    }
  }
  if (a.model.d_model % a.model.n_heads != 0)
    throw UsageError(str_cat("expected --width divisible by --heads, got ", a.model.d_model,
                             " and ", a.model.n_heads));
  if (a.max_seq < a.start_seq)
    throw UsageError(
        str_cat("expected --max-seq >= --start-seq, got ", a.max_seq, " and ", a.start_seq));
  return a;
}

std::string mb(int64_t bytes) { return format_number(double(bytes) / (1 << 20), 2); }

// Every layout the tables compare: one rank, each sequence mode, 1D tensor parallelism.
std::vector<SpLayout> layouts(const Args& a) {
  std::vector<SpLayout> out{{.kind = SpLayout::Kind::single}};
  for (const std::string& m : a.modes) out.push_back({.kind = SpLayout::Kind::sequence, .mode = m});
  out.push_back({.kind = SpLayout::Kind::tensor});
  return out;
}

SpMeasured measure(const Args& a, int64_t seq, const SpLayout& layout,
                   const std::shared_ptr<Communicator>& world) {
  gpt::GPTConfig c = a.model;
  c.context_length = seq;
  return measure_sp_step(c, a.micro, layout, world);
}

// Table 1: activation MB per rank (and step ms) for each length and layout.
void memory_table(const Args& a, const std::shared_ptr<Communicator>& world) {
  const std::vector<SpLayout> all = layouts(a);
  std::vector<std::string> header{"T"};
  for (const SpLayout& l : all) header.push_back(l.name() + " MB (ms)");
  Table table(header);
  for (size_t c = 0; c < header.size(); ++c) table.align_right(c);
  for (int64_t t : a.seqs) {
    std::vector<std::string> row{std::to_string(t)};
    for (const SpLayout& l : all) {
      const SpMeasured m = measure(a, t, l, world);
      row.push_back(mb(m.activation_bytes) + " (" + format_number(m.seconds * 1e3, 0) + ")");
    }
    table.add_row(row);
  }
  if (world->rank() == 0)
    std::printf("\n## Activation memory per rank against the sequence length, N=%d\n\n%s\n",
                world->size(), table.render().c_str());
}

struct Longest {
  int64_t seq = 0;  // 0: not even --start-seq fits
  int64_t bytes = 0;
  bool capped = false;  // --max-seq still fits
};

// The longest length within the budget: doubling from start, then `refine` bisection steps on a
// grid of 16 N (every layout splits such a length).
Longest longest_within(const Args& a, const SpLayout& layout,
                       const std::shared_ptr<Communicator>& world) {
  const int64_t budget = a.budget_mb << 20, grain = 16 * int64_t(world->size());
  auto round = [&](int64_t t) { return std::max(grain, t / grain * grain); };
  Longest best;
  int64_t lo = round(a.start_seq), hi = 0;
  SpMeasured m = measure(a, lo, layout, world);
  if (m.activation_bytes > budget) return best;
  best = {.seq = lo, .bytes = m.activation_bytes};
  while (hi == 0) {
    const int64_t next = round(2 * lo);
    if (next > a.max_seq) {
      best.capped = true;
      return best;
    }
    m = measure(a, next, layout, world);
    if (m.activation_bytes > budget) {
      hi = next;
    } else {
      lo = next;
      best = {.seq = lo, .bytes = m.activation_bytes};
    }
  }
  for (int i = 0; i < a.refine; ++i) {
    const int64_t mid = round((lo + hi) / 2);
    if (mid <= lo || mid >= hi) break;
    m = measure(a, mid, layout, world);
    if (m.activation_bytes > budget) {
      hi = mid;
    } else {
      lo = mid;
      best = {.seq = lo, .bytes = m.activation_bytes};
    }
  }
  return best;
}

void budget_table(const Args& a, const std::shared_ptr<Communicator>& world) {
  const std::vector<SpLayout> all = layouts(a);
  std::vector<Longest> found;
  for (const SpLayout& l : all) found.push_back(longest_within(a, l, world));
  const Longest& single = found.front();
  const Longest& tp = found.back();
  Table table({"layout", "longest T", "activations (MB)", "vs one rank", "vs tp 1d"});
  for (size_t c = 1; c < 5; ++c) table.align_right(c);
  auto ratio = [](const Longest& x, const Longest& ref) {
    return x.seq > 0 && ref.seq > 0 ? format_number(double(x.seq) / double(ref.seq), 2) + "x"
                                    : std::string("-");
  };
  for (size_t i = 0; i < all.size(); ++i) {
    const Longest& f = found[i];
    const std::string seq = f.seq == 0 ? "< " + std::to_string(a.start_seq)
                                       : (f.capped ? ">= " : "") + std::to_string(f.seq);
    table.add_row({all[i].name() + (i == 0 ? "" : " x" + std::to_string(world->size())), seq,
                   f.seq > 0 ? mb(f.bytes) : "-", ratio(f, single), ratio(f, tp)});
  }
  if (world->rank() == 0)
    std::printf(
        "\n## The longest sequence within %lld MB of activations per rank, N=%d\n\n%s\n"
        "- longest T: doubling from %lld, then %d bisection steps on multiples of %d; \">=\": "
        "--max-seq %lld still fits. The paper reports 3.0x the sequence length of tensor "
        "parallelism for its ring self-attention; here ring materialises its (T/N, T) scores while "
        "one rank and tp 1d run the fused kernel, which keeps no scores.\n",
        static_cast<long long>(a.budget_mb), world->size(), table.render().c_str(),
        static_cast<long long>(a.start_seq), a.refine, 16 * world->size(),
        static_cast<long long>(a.max_seq));
}

int bench_sp(const std::shared_ptr<Communicator>& world, const Args& a) {
  const int n = world->size();
  // Impossible layouts end every rank alike, before any collective, with the numbers named.
  TS_CHECK(n >= 2, "bench sp", "expected at least 2 ranks (mpirun -np N bench sp), got ", n);
  TS_CHECK(a.model.n_heads % n == 0 && a.model.vocab_size % n == 0, "bench sp", "expected --heads ",
           a.model.n_heads, " and --vocab ", a.model.vocab_size, " divisible by the ", n,
           " ranks (all_to_all moves heads, tp 1d splits heads and the "
           "vocabulary)");
  for (int64_t t : a.seqs)
    TS_CHECK(t % n == 0, "bench sp", "expected every --seqs length divisible by the ", n,
             " ranks, got ", t);
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = a.threads > 0 ? a.threads : std::max(1, cores / n);
  set_num_threads(threads);
  if (world->rank() == 0) {
    std::printf(
        "# tessera bench sp: %d ranks, %s, %u hardware threads, %d threads per rank, load "
        "average %s\n# GPT %lld blocks, C=%lld, %lld heads, vocabulary %lld, %lld sequence(s) per "
        "step, f32, dropout off\n",
        n, cpu_model().c_str(), std::thread::hardware_concurrency(), threads,
        load_average().c_str(), static_cast<long long>(a.model.n_layers),
        static_cast<long long>(a.model.d_model), static_cast<long long>(a.model.n_heads),
        static_cast<long long>(a.model.vocab_size), static_cast<long long>(a.micro));
    std::fflush(stdout);
  }
  if (!a.seqs.empty()) memory_table(a, world);
  if (a.budget_mb > 0) budget_table(a, world);
  if (world->rank() == 0)
    std::printf(
        "- activations: the allocator's peak during forward + backward minus the bytes held "
        "before it (parameters and gradients), the busiest rank; ms: the step's wall time, the "
        "slowest rank (ranks share the cores when N exceeds them). One rank runs on rank 0 while "
        "the others wait. ring materialises its (T/N, T) scores; all_to_all and ring_flash run "
        "the fused kernels (no (T, T) scores); tp 1d keeps the residual stream and the "
        "LayerNorms' inputs and outputs whole (B, T, C) on every rank.\n");
  return 0;
}

}  // namespace

int run_sp_command(int argc, char** argv, int first) {
  const std::optional<Args> parsed = parse_on_every_rank(parse_args, argc, argv, first);
  if (!parsed) return 2;
  const Args& args = *parsed;
  return parallel::run_distributed(argc, argv, [&](const std::shared_ptr<Communicator>& world) {
    return bench_sp(world, args);
  });
}

}  // namespace tessera::bench

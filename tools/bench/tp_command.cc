// `bench tp` (tessera bench tp, under mpirun): tensor parallelism on the job's N ranks beside the
// serial run on rank 0 alone, for a transformer block (forward + backward) and a GPT training
// step: step time, the bytes each rank sends by the tensor group's counters beside the Colossal-AI
// documentation's formula, and parameter and activation memory per rank by the allocator's
// counters. One row per scheme; schemes without layers yet print "not available".
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"
#include "models/gpt/gpt_config.h"
#include "models/nn/build_context.h"
#include "parallel/comm/mpi_runtime.h"
#include "parallel/mesh/parallel_context.h"
#include "tools/bench/bench_args.h"
#include "tools/bench/commands.h"
#include "tools/bench/system_info.h"
#include "tools/bench/table.h"
#include "tools/bench/tp_bench.h"
#include "tools/bench/tp_plan.h"

namespace tessera::bench {

const char* const kTpUsage =
    "usage: mpirun -np N bench tp [--batch B] [--seq T] [--d-model C] [--heads H]\n"
    "                  [--model PRESET] [--repeats N] [--threads N] [--skip-block] [--skip-step]\n"
    "  Tensor parallelism over the N ranks, one row per scheme (1d; 2d, 2.5d and 3d print 'not\n"
    "  available' until their layers land) beside the serial run on rank 0 alone, for a\n"
    "  transformer block (forward + backward) and a GPT training step: step time (median), bytes\n"
    "  per rank per step (the tensor group's counters) beside the Colossal-AI documentation's\n"
    "  formula, parameter and activation memory per rank (allocator), ratios to serial.\n"
    "  Rank 0 prints.\n"
    "  --batch B       sequences per step, the same on every rank (default 2)\n"
    "  --seq T         tokens per sequence (default 128)\n"
    "  --d-model C     block width (default 768, gpt2-124m's)\n"
    "  --heads H       block attention heads (default 12)\n"
    "  --model PRESET  GPT of the training step (default gpt-mini; gpt-tiny for quick runs)\n"
    "  --repeats N     timed steps after one warm-up step; the median is reported (default 3)\n"
    "  --threads N     CPU threads per rank (default: the cores divided among the ranks)\n"
    "  --skip-block, --skip-step  leave a section out\n";

namespace {

using parallel::CommCounter;
using parallel::CommKind;
using parallel::CommStats;
using parallel::Communicator;

struct Args {
  TpShape shape;  // batch, sequence, block width and heads, repeats
  std::string model = "gpt-mini";
  int threads = 0;  // 0: the cores divided among the ranks
  bool block = true;
  bool step = true;
};

Args parse_args(const std::vector<std::string>& argv) {
  Args a;
  ArgCursor args(argv);
  while (args.next()) {
    const std::string& flag = args.flag();
    if (flag == "--batch")
      a.shape.batch = parse_int(flag, args.value(), 1, 1 << 20);
    else if (flag == "--seq")
      a.shape.seq = parse_int(flag, args.value(), 1, 1 << 20);
    else if (flag == "--d-model")
      a.shape.d_model = parse_int(flag, args.value(), 1, 1 << 20);
    else if (flag == "--heads")
      a.shape.heads = parse_int(flag, args.value(), 1, 1 << 16);
    else if (flag == "--model")
      a.model = args.value();
    else if (flag == "--repeats")
      a.shape.repeats = int(parse_int(flag, args.value(), 1, 1000));
    else if (flag == "--threads")
      a.threads = int(parse_int(flag, args.value(), 1, 4096));
    else if (flag == "--skip-block")
      a.block = false;
    else if (flag == "--skip-step")
      a.step = false;
    else
      throw UsageError("expected an option of bench tp, got '" + flag + "'");
  }
  if (a.shape.d_model % a.shape.heads != 0) {
    throw UsageError("expected --d-model divisible by --heads, got " +
                     std::to_string(a.shape.d_model) + " and " + std::to_string(a.shape.heads));
  }
  return a;
}

std::string mb(int64_t bytes) { return format_number(double(bytes) / (1 << 20), 2); }
std::string ratio(double num, double den) { return den > 0 ? format_number(num / den, 2) : "-"; }

// "2+2 all_reduce": per kind called, forward calls + backward calls.
std::string describe_calls(const CommStats& forward, const CommStats& step) {
  std::string out;
  for (int k = 0; k < parallel::kNumCommKinds; ++k) {
    const int64_t total = step.by_kind[size_t(k)].calls, fwd = forward.by_kind[size_t(k)].calls;
    if (total == 0 || CommKind(k) == CommKind::barrier) continue;
    out += str_cat(out.empty() ? "" : ", ", fwd, "+", total - fwd, " ",
                   parallel::comm_kind_name(CommKind(k)));
  }
  return out.empty() ? "none" : out;
}

// The schemes this version measures: their block and GPT twins exist in the factories. Adding one
// (2d, ...): its layers, its VolumePlan beside plan_1d_* (tp_plan.h) and its name here; its rows
// then measure instead of printing "not available".
bool has_layers(const std::string& mode) { return mode == "1d"; }

// What the implementation predicts `mode` moves per rank in a section.
VolumePlan plan_for(const std::string& mode, bool gpt_step, const Args& a,
                    const gpt::GPTConfig& config, int p) {
  TS_CHECK(mode == "1d", "bench tp", "no volume prediction for mode ", mode);
  return gpt_step ? plan_1d_gpt_step(config, a.shape.batch, a.shape.seq, p)
                  : plan_1d_block(a.shape.batch, a.shape.seq, a.shape.d_model, p);
}

// One measured scheme in a section.
struct SchemeRun {
  SchemeLayout layout;
  TpMeasured m;
  VolumePlan plan;
};

// What a section's notes say beyond the shared ones.
struct SectionNotes {
  std::string replicated;  // which parameters the twins replicate
  std::string state;       // what the step's peak holds
  std::string extra;       // what the plan's non-activation traffic is ("" when none)
};

// One section's table and notes, printed by rank 0. `doc` gives A and k for the formula column
// (the 1D count, which prices every scheme at the same activation exchanges).
void print_section(const std::string& title, const TpMeasured& serial,
                   const std::map<std::string, SchemeRun>& runs, const VolumePlan& doc, int n,
                   const Args& a, int threads, const SectionNotes& notes) {
  Table table({"mode", "P", "layout", "step (ms)", "speed-up", "collectives (fwd+bwd)",
               "sent/rank (B)", "doc formula (B)", "doc factor", "params/rank (MB)", "vs serial",
               "activations/rank (MB)", "vs serial", "peak/rank (MB)"});
  for (size_t c = 1; c < 14; ++c)
    if (c != 2 && c != 5) table.align_right(c);
  const auto mem_cells = [&](const TpMeasured& m) {
    return std::vector<std::string>{
        mb(m.param_bytes), ratio(m.param_bytes, serial.param_bytes), mb(m.activation_bytes),
        ratio(m.activation_bytes, serial.activation_bytes), mb(m.peak_bytes)};
  };
  std::vector<std::string> row{
      "serial", "1", "rank 0 alone", format_number(serial.seconds * 1e3, 1), "1.00", "none", "0",
      "0",      "0"};
  for (auto& cell : mem_cells(serial)) row.push_back(cell);
  table.add_row(row);
  for (const std::string& mode : tp_modes()) {
    const SchemeLayout s = scheme_layout(mode, n);
    const std::string formula = s.fits ? format_number(doc_bytes(s, doc), 0) : "n/a";
    const std::string factor = s.fits ? format_number(s.factor, 2) : "n/a";
    const auto run = runs.find(mode);
    if (run != runs.end()) {
      const TpMeasured& m = run->second.m;
      row = {mode,
             std::to_string(n),
             s.layout,
             format_number(m.seconds * 1e3, 1),
             ratio(serial.seconds, m.seconds),
             describe_calls(m.forward, m.step),
             std::to_string(m.step.total().bytes_sent),
             formula,
             factor};
      for (auto& cell : mem_cells(m)) row.push_back(cell);
    } else {
      const std::string why = n == 1 ? "needs P >= 2" : !s.fits ? "no layout" : "not available";
      row = {mode,     std::to_string(n),
             s.layout, why,
             "-",      "-",
             why,      formula,
             factor,   why,
             "-",      why,
             "-",      "-"};
    }
    table.add_row(row);
  }
  std::printf("\n## %s (f32; B=%lld, T=%lld; %d ranks, %d threads per rank on every row)\n\n%s\n",
              title.c_str(), static_cast<long long>(a.shape.batch),
              static_cast<long long>(a.shape.seq), n, threads, table.render().c_str());
  std::printf(
      "- A = B x T x C x 4 = %lld bytes (one activation); k = %lld activation-sized all-reduces "
      "per step under 1D. doc formula = factor x k x A, the factor from the Colossal-AI "
      "documentation: 1D 2(P-1)/P, 2D 6(q-1)/q, 2.5D 3(q-1)(d+1)/(dq), 3D 6(q-1)/q^3 (every "
      "scheme priced at the same k exchanges).\n",
      static_cast<long long>(doc.activation_bytes), static_cast<long long>(doc.exchanges));
  std::printf(
      "- sent/rank: bytes the busiest rank sends per step by the tensor group's counters (a ring "
      "all-reduce sends floor(2(P-1)/P x payload) per call and receives as much).\n");
  for (const auto& [mode, run] : runs) {
    const CommCounter got = run.m.step.total();
    const int64_t calls = got.calls - run.m.step[CommKind::barrier].calls;
    const bool match = got.bytes_sent == run.plan.sent_bytes &&
                       calls == run.plan.forward_calls + run.plan.backward_calls;
    std::printf(
        "- %s prediction (tools/bench/tp_plan.cc): %lld+%lld calls, %lld payload bytes, %lld "
        "bytes sent per rank; measured %lld calls, %lld payload bytes, %lld sent: %s.\n",
        mode.c_str(), static_cast<long long>(run.plan.forward_calls),
        static_cast<long long>(run.plan.backward_calls),
        static_cast<long long>(run.plan.payload_bytes), static_cast<long long>(run.plan.sent_bytes),
        static_cast<long long>(calls), static_cast<long long>(got.payload_bytes),
        static_cast<long long>(got.bytes_sent), match ? "equal" : "MISMATCH");
    const double gap = double(got.bytes_sent) - doc_bytes(run.layout, doc);
    std::printf("- %s gap sent/rank - doc formula = %s bytes%s\n", mode.c_str(),
                format_number(gap, 0).c_str(),
                run.plan.extra_sent_bytes == 0
                    ? "."
                    : str_cat("; predicted: ", run.plan.extra_sent_bytes, " bytes sent (",
                              run.plan.extra_payload_bytes, " payload) for ", notes.extra,
                              ", which the formula does not price.")
                          .c_str());
    std::printf(
        "- %s params/rank %s MB = sharded %s MB (serial / P = %s MB) + replicated %s MB (%s, on "
        "every rank).\n",
        mode.c_str(), mb(run.m.param_bytes).c_str(),
        mb(run.m.param_bytes - run.m.replicated_bytes).c_str(),
        format_number(double(serial.param_bytes - run.m.replicated_bytes) / n / (1 << 20), 2)
            .c_str(),
        mb(run.m.replicated_bytes).c_str(), notes.replicated.c_str());
  }
  std::printf(
      "- params/rank: allocator bytes the model holds once built; activations/rank: the "
      "forward's allocator peak minus the bytes held when it starts; peak/rank: the allocator's "
      "peak over a step (%s). Times: median of %d steps after one warm-up, slowest rank; CPU "
      "times are indicative, bytes are exact.\n",
      notes.state.c_str(), a.shape.repeats);
}

using Contexts = std::map<std::string, std::unique_ptr<parallel::ParallelContext>>;

// One section: serial on rank 0 (the others wait), then each measured scheme on every rank.
// Rank 0 prints.
template <typename Measure>
void run_section(const std::shared_ptr<Communicator>& world, const Contexts& contexts,
                 bool gpt_step, const Args& a, const gpt::GPTConfig& config, int threads,
                 const std::string& title, const SectionNotes& notes, const Measure& measure) {
  const int n = world->size();
  TpMeasured serial;
  if (world->rank() == 0) {
    Generator gen(1234);
    serial = measure(nn::BuildContext(gen), nullptr);
  }
  world->barrier()->wait();
  std::map<std::string, SchemeRun> runs;
  for (const auto& [mode, ctx] : contexts) {
    Generator gen(1234);
    runs[mode] = {scheme_layout(mode, n),
                  measure(nn::BuildContext(gen, ctx.get()), ctx->tensor_group().get()),
                  plan_for(mode, gpt_step, a, config, n)};
    world->barrier()->wait();
  }
  if (world->rank() == 0)
    print_section(title, serial, runs, plan_for("1d", gpt_step, a, config, n), n, a, threads,
                  notes);
}

int bench_tp(const std::shared_ptr<Communicator>& world, const Args& a) {
  const int n = world->size();
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = a.threads > 0 ? a.threads : std::max(1, cores / n);
  set_num_threads(threads);
  const gpt::GPTConfig config = gpt::gpt_preset(a.model);
  // Impossible layouts end every rank alike, before any collective, with the numbers named.
  TS_CHECK(a.shape.heads % n == 0 && a.shape.d_model % n == 0, "bench tp", "expected --heads ",
           a.shape.heads, " and --d-model ", a.shape.d_model, " divisible by the ", n,
           " ranks (1D splits heads)");
  TS_CHECK(config.n_heads % n == 0 && a.shape.seq <= config.context_length, "bench tp", "expected ",
           a.model, "'s ", config.n_heads, " heads divisible by the ", n, " ranks and --seq ",
           a.shape.seq, " <= its context length ", config.context_length);
  if (world->rank() == 0) {
    std::printf("# tessera bench tp: %d ranks, %s, %u hardware threads, load average %s\n", n,
                cpu_model().c_str(), std::thread::hardware_concurrency(), load_average().c_str());
  }
  Contexts contexts;
  for (const std::string& mode : tp_modes()) {
    const SchemeLayout s = scheme_layout(mode, n);
    if (n == 1 || !s.fits || !has_layers(mode)) continue;
    parallel::ParallelConfig pc;
    pc.tensor.size = n;
    pc.tensor.mode = mode;
    pc.tensor.depth = s.depth;
    contexts[mode] = std::make_unique<parallel::ParallelContext>(pc, world);
  }
  if (a.block) {
    run_section(world, contexts, /*gpt_step=*/false, a, config, threads,
                str_cat("Transformer block forward + backward, C=", a.shape.d_model, ", ",
                        a.shape.heads, " heads, MLP 4C"),
                {.replicated = "LayerNorms, row-parallel biases",
                 .state = "weights, gradients, input, activations",
                 .extra = ""},
                [&](const nn::BuildContext& b, Communicator* g) {
                  return measure_tp_block(a.shape, b, g);
                });
  }
  if (a.step) {
    run_section(world, contexts, /*gpt_step=*/true, a, config, threads,
                str_cat("GPT training step, ", a.model, " (", config.n_layers,
                        " layers, C=", config.d_model, ", ", config.n_heads, " heads, vocabulary ",
                        config.vocab_size, "; loss, backward, AdamW)"),
                {.replicated = "LayerNorms, row-parallel biases, positions",
                 .state = "weights, gradients, AdamW state, activations",
                 .extra = "the vocab-parallel cross-entropy's row statistics (max, then sum-exp "
                          "and target logit: 3 x B x T floats)"},
                [&](const nn::BuildContext& b, Communicator* g) {
                  return measure_tp_step(a.shape, config, b, g);
                });
  }
  return 0;
}

}  // namespace

int run_tp_command(int argc, char** argv, int first) {
  const std::optional<Args> parsed = parse_on_every_rank(parse_args, argc, argv, first);
  if (!parsed) return 2;
  const Args& args = *parsed;
  return parallel::run_distributed(argc, argv, [&](const std::shared_ptr<Communicator>& world) {
    return bench_tp(world, args);
  });
}

}  // namespace tessera::bench

// `bench tp` (tessera bench tp, under mpirun): tensor parallelism on the job's N ranks beside the
// serial run on rank 0 alone, for a transformer block (forward + backward) and a GPT training
// step: step time, the bytes each rank sends by the counters of every group the layout uses beside
// the implementation's prediction and the Colossal-AI documentation's formula, and parameter and
// activation memory per rank by the allocator's counters, with ratios to 1D. One row per scheme;
// those whose layout does not fit the ranks or the shapes say why.
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
#include "models/plan/tp_volume.h"

namespace tessera::bench {

// The tensor-parallel volumes live with the planner (models/plan/tp_volume.h).
using namespace ::tessera::plan;

const char* const kTpUsage =
    "usage: mpirun -np N bench tp [--batch B] [--seq T] [--d-model C] [--heads H]\n"
    "                  [--model PRESET] [--step-heads H] [--repeats N] [--quick] [--threads N]\n"
    "                  [--skip-block] [--skip-step]\n"
    "  Tensor parallelism over the N ranks, one row per mode (1d, 2d, 2.5d, 3d: those whose "
    "layout\n"
    "  fits N and the shapes; the others say why not) beside the serial run on rank 0 alone, for "
    "a\n"
    "  transformer block (forward + backward) and a GPT training step: step time (median), bytes\n"
    "  per rank per step (the counters of every group the layout uses) beside the "
    "implementation's\n"
    "  prediction and the Colossal-AI documentation's factor, parameter and activation memory per\n"
    "  rank (allocator), ratios to 1D. Rank 0 prints.\n"
    "  --batch B       sequences per step, the same on every rank (default 4; 2.5D splits it d q)\n"
    "  --seq T         tokens per sequence (default 128)\n"
    "  --d-model C     block width (default 768, gpt2-124m's)\n"
    "  --heads H       block attention heads (default 12, gpt2-124m's)\n"
    "  --model PRESET  GPT of the training step (default gpt-mini; gpt-tiny for quick runs)\n"
    "  --step-heads H  its attention heads (default 8: every mode splits them on 4 and 8 ranks;\n"
    "                  0 keeps the preset's)\n"
    "  --repeats N     timed steps after one warm-up step; the median is reported (default 3)\n"
    "  --quick         --repeats 1 --seq 64: a few minutes on 8 ranks of 2 cores\n"
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
  int64_t step_heads = 8;  // 0: the preset's
  int threads = 0;         // 0: the cores divided among the ranks
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
    else if (flag == "--step-heads")
      a.step_heads = parse_int(flag, args.value(), 0, 1 << 16);
    else if (flag == "--quick") {
      a.shape.repeats = 1;
      a.shape.seq = 64;
    } else if (flag == "--repeats")
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

// What the implementation predicts `layout` moves per rank in a section.
VolumePlan plan_for(const SchemeLayout& layout, bool gpt_step, const Args& a,
                    const gpt::GPTConfig& config) {
  return gpt_step ? plan_gpt_step(layout, config, a.shape.batch, a.shape.seq)
                  : plan_block(layout, a.shape.batch, a.shape.seq, a.shape.d_model);
}

// One measured scheme in a section.
struct SchemeRun {
  SchemeLayout layout;
  TpMeasured m;
  VolumePlan plan;
};

// What a section's notes say beyond the shared ones.
struct SectionNotes {
  std::string replicated;  // which parameters the 1D twins replicate
  std::string state;       // what the step's peak holds
  std::string extra;       // what the 1D plan's non-activation traffic is ("" when none)
  std::string edges;       // what the section moves outside its blocks ("" when nothing)
};

// Why each mode has no row in a section ("" for those measured).
using Misfits = std::map<parallel::TensorMode, std::string>;

int64_t sent(const TpMeasured& m) { return m.step.total().bytes_sent; }

// The gap between the measured bytes and the documentation's formula, explained per mode.
void print_gap(const SchemeRun& run, const VolumePlan& doc, const SectionNotes& notes) {
  const int64_t got = sent(run.m);
  const double formula = doc_bytes(run.layout, doc);
  std::printf("- %s gap sent/rank - doc formula = %s bytes (measured %.2fx the formula).",
              parallel::tensor_mode_name(run.layout.mode),
              format_number(double(got) - formula, 0).c_str(),
              formula > 0 ? double(got) / formula : 0.0);
  if (run.layout.mode == parallel::TensorMode::one_d) {
    std::printf("%s\n",
                run.plan.extra_sent_bytes == 0
                    ? " The formula is the ring all-reduce's 2(P-1)/P of k activations: exact."
                    : str_cat(" Predicted: ", run.plan.extra_sent_bytes, " bytes sent (",
                              run.plan.extra_payload_bytes, " payload) for ", notes.extra,
                              ", which the formula does not price.")
                          .c_str());
    return;
  }
  const int64_t param = run.plan.param_sent_bytes, act = run.plan.sent_bytes - param;
  std::printf(
      " Of the predicted %lld bytes, %lld (%.0f%%) are parameter blocks and their gradients "
      "(broadcast, gathered, reduced and scattered weights and biases, LayerNorm parameters%s): "
      "they do not scale with B x T, the documentation prices activations only. The other %lld "
      "are activation blocks and LayerNorm (and loss) statistics (%.2fx the formula):",
      static_cast<long long>(run.plan.sent_bytes), static_cast<long long>(param),
      run.plan.sent_bytes ? 100.0 * param / run.plan.sent_bytes : 0,
      run.layout.depth > 1 ? ", the depth group's gradient sums" : "", static_cast<long long>(act),
      formula > 0 ? act / formula : 0.0);
  if (run.layout.mode == parallel::TensorMode::three_d) {
    std::printf(
        " each Linear3D all-gathers its input and reduce-scatters its output over q ranks "
        "((q-1)/q of a 1/q-wide piece each way, both ways again backward), 4 Linears and 2 "
        "LayerNorms per block where the formula counts k = 4 activation exchanges.");
  } else {
    std::printf(
        " SUMMA broadcasts each input block once per Linear forward and twice backward, and "
        "reduces its gradient over q steps (the root sends its block once per q-step broadcast, "
        "a non-root sends (q-1) partial blocks per q-step reduce), over 4 Linears and 2 "
        "LayerNorms per block where the formula counts k = 4 exchanges.");
  }
  if (!notes.edges.empty()) std::printf(" %s", notes.edges.c_str());
  if (!run.plan.complete)
    std::printf(
        " Not modelled: this GPT's blocks are not plan_block's (biases, MLP 4C); %lld bytes "
        "measured - predicted.",
        static_cast<long long>(got - run.plan.sent_bytes));
  std::printf("\n");
}

// One section's table and notes, printed by rank 0. `doc` gives A and k for the formula column
// (the 1D count, which prices every scheme at the same activation exchanges).
void print_section(const std::string& title, const TpMeasured& serial,
                   const std::map<parallel::TensorMode, SchemeRun>& runs, const Misfits& misfits,
                   const VolumePlan& doc, int n, const Args& a, int threads,
                   const SectionNotes& notes) {
  Table table({"mode", "layout", "step (ms)", "vs 1d", "collectives (fwd+bwd)", "sent/rank (B)",
               "predicted (B)", "doc factor", "doc formula (B)", "vs 1d", "params/rank (MB)",
               "vs 1d", "activations/rank (MB)", "vs 1d", "peak/rank (MB)"});
  for (size_t c = 2; c < 15; ++c)
    if (c != 4) table.align_right(c);
  const auto one_d = runs.find(parallel::TensorMode::one_d);
  const TpMeasured* base = one_d == runs.end() ? nullptr : &one_d->second.m;
  const auto vs = [&](double v, double of_1d) { return base ? ratio(v, of_1d) : "-"; };
  const auto cells = [&](const TpMeasured& m, const std::string& collectives,
                         const std::string& predicted, const std::string& factor,
                         const std::string& formula) {
    const TpMeasured& b = base ? *base : m;
    return std::vector<std::string>{format_number(m.seconds * 1e3, 1),
                                    vs(m.seconds, b.seconds),
                                    collectives,
                                    std::to_string(sent(m)),
                                    predicted,
                                    factor,
                                    formula,
                                    vs(double(sent(m)), double(sent(b))),
                                    mb(m.param_bytes),
                                    vs(m.param_bytes, b.param_bytes),
                                    mb(m.activation_bytes),
                                    vs(m.activation_bytes, b.activation_bytes),
                                    mb(m.peak_bytes)};
  };
  std::vector<std::string> row{"serial", "rank 0 alone"};
  for (auto& c : cells(serial, "none", "0", "0", "0")) row.push_back(c);
  table.add_row(row);
  for (parallel::TensorMode mode : tp_modes()) {
    const SchemeLayout s = scheme_layout(mode, n);
    const std::string formula = s.fits ? format_number(doc_bytes(s, doc), 0) : "n/a";
    const std::string factor = s.fits ? format_number(s.factor, 2) : "n/a";
    const auto run = runs.find(mode);
    row = {parallel::tensor_mode_name(mode), s.layout};
    if (run != runs.end()) {
      const VolumePlan& plan = run->second.plan;
      const std::string predicted =
          std::to_string(plan.sent_bytes) + (plan.complete ? "" : " (not modelled)");
      for (auto& c : cells(run->second.m, describe_calls(run->second.m.forward, run->second.m.step),
                           predicted, factor, formula))
        row.push_back(c);
    } else {
      const auto why = misfits.find(mode);
      const std::string text = n == 1                 ? "needs P >= 2"
                               : why != misfits.end() ? why->second
                                                      : "not run";
      row.push_back("-");
      row.push_back("-");
      row.push_back(text);
      for (const std::string& c : std::vector<std::string>{"-", "-", factor, formula})
        row.push_back(c);
      for (int i = 0; i < 6; ++i) row.push_back("-");
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
      "- sent/rank: bytes the busiest rank sends per step, summed over every group of the layout "
      "(1D the tensor group; 2D the grid's rows and columns, 2.5D also its depth; 3D the cube's "
      "input, weight and output groups) by their counters: a ring all-reduce sends floor(2(P-1)/P "
      "x payload) per call, an all-gather, reduce-scatter or all-to-all floor((P-1)/P x payload), "
      "a broadcast's root the payload, a reduce's non-roots the payload. predicted: "
      "models/plan/tp_volume.cc; vs 1d: the ratio to the 1D row (\"-\" where 1D does not fit).\n");
  for (const auto& [mode, run] : runs) {
    const CommCounter got = run.m.step.total();
    const int64_t calls = got.calls - run.m.step[CommKind::barrier].calls;
    const bool match = got.bytes_sent == run.plan.sent_bytes &&
                       calls == run.plan.forward_calls + run.plan.backward_calls &&
                       got.payload_bytes == run.plan.payload_bytes;
    std::printf(
        "- %s prediction%s: %lld+%lld calls, %lld payload bytes, %lld bytes sent per rank; "
        "measured %lld calls, %lld payload bytes, %lld sent: %s.\n",
        parallel::tensor_mode_name(mode),
        run.plan.complete ? "" : " (a GPT plan_block does not model)",
        static_cast<long long>(run.plan.forward_calls),
        static_cast<long long>(run.plan.backward_calls),
        static_cast<long long>(run.plan.payload_bytes), static_cast<long long>(run.plan.sent_bytes),
        static_cast<long long>(calls), static_cast<long long>(got.payload_bytes),
        static_cast<long long>(got.bytes_sent),
        match               ? "equal"
        : run.plan.complete ? "MISMATCH"
                            : "not modelled");
    if (run.plan.uncounted_calls > 0) {
      std::printf(
          "- %s besides: %lld calls, %lld payload bytes, %lld bytes sent per rank on a group "
          "no counter of the layout reads (the vocab-parallel loss's row statistics, B/q x T "
          "floats (max) and 2 B/q x T (sum-exp, target logit), all-reduced over the (j, k) plane "
          "of q^2 ranks that VocabParallelLMHead3D splits off itself): predicted only, in neither "
          "sent/rank nor predicted.\n",
          parallel::tensor_mode_name(mode), static_cast<long long>(run.plan.uncounted_calls),
          static_cast<long long>(run.plan.uncounted_payload_bytes),
          static_cast<long long>(run.plan.uncounted_sent_bytes));
    }
    print_gap(run, doc, notes);
    std::printf(
        "- %s params/rank %s MB = sharded %s MB (serial / P = %s MB) + replicated %s MB%s.\n",
        parallel::tensor_mode_name(mode), mb(run.m.param_bytes).c_str(),
        mb(run.m.param_bytes - run.m.replicated_bytes).c_str(),
        format_number(double(serial.param_bytes - run.m.replicated_bytes) / n / (1 << 20), 2)
            .c_str(),
        mb(run.m.replicated_bytes).c_str(),
        mode == parallel::TensorMode::one_d
            ? str_cat(" (", notes.replicated, ", on every rank)").c_str()
        : run.layout.depth > 1
            ? " (by placement; 2.5D holds each block on its d depth layers: serial / q^2)"
            : " (by placement)");
  }
  std::printf(
      "- params/rank: allocator bytes the model holds once built; activations/rank: the "
      "forward's allocator peak minus the bytes held when it starts; peak/rank: the allocator's "
      "peak over a step (%s). Times: median of %d steps after one warm-up, slowest rank; CPU "
      "times are indicative (the ranks share %u cores), bytes and memory are exact.\n",
      notes.state.c_str(), a.shape.repeats, std::thread::hardware_concurrency());
}

using Contexts = std::map<parallel::TensorMode, std::unique_ptr<parallel::ParallelContext>>;

// One section: serial on rank 0 (the others wait), then each fitting scheme on every rank.
// Rank 0 prints.
template <typename Measure>
void run_section(const std::shared_ptr<Communicator>& world, const Contexts& contexts,
                 const TpDims& dims, bool gpt_step, const Args& a, const gpt::GPTConfig& config,
                 int threads, const std::string& title, const SectionNotes& notes,
                 const Measure& measure) {
  const int n = world->size();
  TpMeasured serial;
  if (world->rank() == 0) {
    Generator gen(1234);
    serial = measure(nn::BuildContext(gen));
  }
  world->barrier()->wait();
  std::map<parallel::TensorMode, SchemeRun> runs;
  Misfits misfits;
  for (parallel::TensorMode mode : tp_modes()) {
    const SchemeLayout layout = scheme_layout(mode, n);
    misfits[mode] = layout_misfit(layout, dims);
    const auto ctx = contexts.find(mode);
    if (!misfits[mode].empty() || ctx == contexts.end()) continue;
    Generator gen(1234);
    runs[mode] = {layout, measure(nn::BuildContext(gen, ctx->second.get())),
                  plan_for(layout, gpt_step, a, config)};
    world->barrier()->wait();
  }
  if (world->rank() == 0)
    print_section(title, serial, runs, misfits,
                  plan_for(scheme_layout(parallel::TensorMode::one_d, n), gpt_step, a, config), n,
                  a, threads, notes);
}

int bench_tp(const std::shared_ptr<Communicator>& world, const Args& a) {
  const int n = world->size();
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = a.threads > 0 ? a.threads : std::max(1, cores / n);
  set_num_threads(threads);
  gpt::GPTConfig config = gpt::gpt_preset(a.model);
  if (a.step_heads > 0) config.n_heads = a.step_heads;
  // Impossible shapes end every rank alike, before any collective, with the numbers named; a mode
  // whose layout does not split them prints why in its row.
  TS_CHECK(config.d_model % config.n_heads == 0 && a.shape.seq <= config.context_length, "bench tp",
           "expected ", a.model, "'s d_model ", config.d_model, " divisible by its ",
           config.n_heads, " heads and --seq ", a.shape.seq, " <= its context length ",
           config.context_length);
  if (world->rank() == 0) {
    std::printf("# tessera bench tp: %d ranks, %s, %u hardware threads, load average %s\n", n,
                cpu_model().c_str(), std::thread::hardware_concurrency(), load_average().c_str());
  }
  Contexts contexts;
  for (parallel::TensorMode mode : tp_modes()) {
    const SchemeLayout s = scheme_layout(mode, n);
    if (n == 1 || !s.fits) continue;
    parallel::ParallelConfig pc;
    pc.tensor.size = n;
    pc.tensor.mode = mode;
    pc.tensor.depth = s.depth;
    contexts[mode] = std::make_unique<parallel::ParallelContext>(pc, world);
  }
  if (a.block) {
    const TpDims dims{.batch = a.shape.batch,
                      .seq = a.shape.seq,
                      .d_model = a.shape.d_model,
                      .heads = a.shape.heads};
    run_section(world, contexts, dims, /*gpt_step=*/false, a, config, threads,
                str_cat("Transformer block forward + backward, C=", a.shape.d_model, ", ",
                        a.shape.heads, " heads, MLP 4C"),
                {.replicated = "LayerNorms, row-parallel biases",
                 .state = "weights, gradients, input, activations",
                 .extra = "",
                 .edges = ""},
                [&](const nn::BuildContext& b) { return measure_tp_block(a.shape, b); });
  }
  if (a.step) {
    const TpDims dims{.batch = a.shape.batch,
                      .seq = a.shape.seq,
                      .d_model = config.d_model,
                      .heads = config.n_heads,
                      .vocab = config.vocab_size};
    run_section(world, contexts, dims, /*gpt_step=*/true, a, config, threads,
                str_cat("GPT training step, ", a.model, " (", config.n_layers,
                        " layers, C=", config.d_model, ", ", config.n_heads, " heads, vocabulary ",
                        config.vocab_size, "; loss, backward, AdamW)"),
                {.replicated = "LayerNorms, row-parallel biases, positions",
                 .state = "weights, gradients, AdamW state, activations",
                 .extra = "the vocab-parallel cross-entropy's row statistics (max, then sum-exp "
                          "and target logit: 3 x B x T floats)",
                 .edges = "Outside the blocks the step adds the GPT's edges (tp_volume.h, "
                          "plan_gpt_edges): the vocab-parallel token embedding's partial rows, "
                          "the T position rows used, ln_f, the tied LM head's product (SUMMA "
                          "under 2D / 2.5D, a Linear3D C -> V under 3D), the loss's statistics, "
                          "and under 2.5D the embedding tables' depth gradient sums."},
                [&](const nn::BuildContext& b) { return measure_tp_step(a.shape, config, b); });
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

// `bench zero` (tessera bench zero, under mpirun): ZeRO stages 0-3 of the trainer's update engine
// (models/train/update_engine.h) on the job's N data ranks, for a GPT in f32 with AdamW and in bf16
// with f32 masters: model-state bytes per rank by the allocator's counters, term by term, beside
// the ZeRO formulas (tools/bench/zero_plan.h), the step time and the bytes each rank sends per step
// by the data group's counters beside data parallelism's 2 Psi ring volume (stage 3: what its
// gathers receive beside the ZeRO paper's 3 Psi, in the notes).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "autograd/engine.h"
#include "core/allocator.h"
#include "core/error.h"
#include "core/factory.h"
#include "core/parallel.h"
#include "models/gpt/gpt.h"
#include "models/gpt/gpt_config.h"
#include "models/nn/build_context.h"
#include "models/train/update_engine.h"
#include "optim/optimizer.h"
#include "parallel/comm/mpi_runtime.h"
#include "parallel/zero/offload.h"
#include "parallel/zero/param_placement.h"
#include "tools/bench/bench_args.h"
#include "tools/bench/commands.h"
#include "tools/bench/system_info.h"
#include "tools/bench/table.h"
#include "tools/bench/zero_bench_util.h"
#include "tools/bench/zero_limit.h"
#include "tools/bench/zero_plan.h"

namespace tessera::bench {

const char* const kZeroUsage =
    "usage: mpirun -np N bench zero [--model PRESET] [--d-model C] [--layers L] [--heads H]\n"
    "                  [--vocab V] [--batch B] [--seq T] [--precision f32|bf16|both]\n"
    "                  [--repeats N] [--threads N] [--device-limit SIZE [--max-layers N]]\n"
    "  ZeRO stages 0-3 of the trainer's update engine on the N data ranks, for a GPT in f32\n"
    "  (AdamW) and bf16 with f32 masters: model-state bytes per rank (parameters, gradients held\n"
    "  after the step's reduction, optimizer states, masters; the allocator's counters) beside\n"
    "  the ZeRO formulas, the step time (median) and the bytes sent per rank per step (the data\n"
    "  group's counters) beside data parallelism's 2 Psi ring volume. Rank 0 prints.\n"
    "  --model PRESET  start from a preset (gpt-tiny, gpt-mini, gpt2-124m, ...); the default is\n"
    "                  a GPT of about 10M parameters (C 256, 10 layers, 8 heads, vocabulary 8192,\n"
    "                  context 256); the flags below override either\n"
    "  --d-model C, --layers L, --heads H, --vocab V   the GPT's shape (C 768, L 12, V 50257: "
    "124M)\n"
    "  --batch B       sequences per rank per step (default 2)\n"
    "  --seq T         tokens per sequence (default 64)\n"
    "  --precision P   f32, bf16 or both (default both)\n"
    "  --repeats N     timed steps after the measured first step; the median is reported\n"
    "                  (default 3)\n"
    "  --threads N     CPU threads per rank (default: the cores divided among the ranks)\n"
    "  --device-limit SIZE  instead: the largest GPT (layers grown at the given width) whose\n"
    "                  f32 step keeps the device under SIZE (\"1G\", \"512M\"), ZeRO stage 3\n"
    "                  against stage 3 with offload and offload_params, each size trained\n"
    "  --max-layers N  the search's largest layer count (default 1024)\n";

namespace {

using parallel::CommKind;
using parallel::CommStats;
using parallel::Communicator;

struct Args {
  gpt::GPTConfig config;
  std::string model = "default (~10M)";
  int64_t batch = 2, seq = 64;
  std::vector<ZeroPrecision> precisions = {ZeroPrecision::f32, ZeroPrecision::bf16};
  int repeats = 3;
  int threads = 0;
  int64_t device_limit = 0;  // --device-limit: the search instead of the tables
  int64_t max_layers = 1024;
};

gpt::GPTConfig default_config() {
  gpt::GPTConfig c;
  c.vocab_size = 8192;
  c.context_length = 256;
  c.n_layers = 10;
  c.n_heads = 8;
  c.d_model = 256;
  return c;
}

Args parse_args(const std::vector<std::string>& argv) {
  Args a;
  a.config = default_config();
  // --model first, so the shape flags override the preset wherever they are.
  for (size_t i = 0; i + 1 < argv.size(); ++i) {
    if (argv[i] == "--model") {
      try {
        a.config = gpt::gpt_preset(argv[i + 1]);
      } catch (const ValueError& e) {
        throw UsageError(str_cat("expected --model to name a preset: ", e.what()));
      }
      a.model = argv[i + 1];
    }
  }
  ArgCursor args(argv);
  while (args.next()) {
    const std::string& flag = args.flag();
    if (flag == "--model")
      args.value();
    else if (flag == "--d-model")
      a.config.d_model = parse_int(flag, args.value(), 1, 1 << 16);
    else if (flag == "--layers")
      a.config.n_layers = parse_int(flag, args.value(), 1, 1024);
    else if (flag == "--heads")
      a.config.n_heads = parse_int(flag, args.value(), 1, 1024);
    else if (flag == "--vocab")
      a.config.vocab_size = parse_int(flag, args.value(), 2, 1 << 22);
    else if (flag == "--batch")
      a.batch = parse_int(flag, args.value(), 1, 1 << 16);
    else if (flag == "--seq")
      a.seq = parse_int(flag, args.value(), 1, 1 << 16);
    else if (flag == "--repeats")
      a.repeats = int(parse_int(flag, args.value(), 1, 1000));
    else if (flag == "--threads")
      a.threads = int(parse_int(flag, args.value(), 1, 4096));
    else if (flag == "--max-layers")
      a.max_layers = parse_int(flag, args.value(), 1, 1 << 16);
    else if (flag == "--device-limit") {
      try {
        a.device_limit = parallel::zero::parse_bytes(args.value(), "--device-limit");
      } catch (const ValueError& e) {
        throw UsageError(e.what());
      }
    }
    else if (flag == "--precision") {
      const std::string p = args.value();
      if (p == "f32")
        a.precisions = {ZeroPrecision::f32};
      else if (p == "bf16")
        a.precisions = {ZeroPrecision::bf16};
      else if (p == "both")
        a.precisions = {ZeroPrecision::f32, ZeroPrecision::bf16};
      else
        throw UsageError("expected --precision f32, bf16 or both, got '" + p + "'");
    } else {
      throw UsageError("expected an option of bench zero, got '" + flag + "'");
    }
  }
  if (a.config.d_model % a.config.n_heads != 0) {
    throw UsageError(str_cat("expected --d-model divisible by --heads, got ", a.config.d_model,
                             " and ", a.config.n_heads));
  }
  a.config.context_length = std::max(a.config.context_length, a.seq);
  try {
    a.config.validate();
  } catch (const ValueError& e) {
    throw UsageError(str_cat("expected a valid GPT shape: ", e.what()));
  }
  return a;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int64_t held() { return memory_stats(kCPU).current_bytes; }


// One (precision, stage) run's measurements on this rank (maxima over the ranks once returned).
struct ZeroMeasured {
  int64_t psi = 0;           // parameters
  int64_t params = 0;        // bytes the model holds once built (and converted)
  int64_t workspace = 0;     // bytes a warm-up step left held (kernel caches), before any engine
  int64_t masters = 0;       // the f32 tensors the optimizer steps that are not the parameters
  int64_t buffers = 0;       // the rest of what the update engine allocated when built
  int64_t grads = 0;         // held after the first step's reduction, over the step's start
  int64_t states = 0;        // allocated by the first optimizer step
  int64_t after_step = 0;    // held after the first step's finish_step, over the step's start
  double seconds = 0;        // median step, slowest rank
  CommStats step;            // the last timed step's counters on this rank
  int64_t sent = 0;          // bytes sent that step, the busiest rank
  int64_t gathered = 0;      // stage 3: bytes its parameter gathers received that step, the busiest
  int64_t reduced = 0;       // bytes its gradient reduces sent that step, the busiest rank
  int64_t gather_bound = 0;  // stage 3: the most parameter bytes gathered at once (live + ahead)
};

ZeroMeasured measure(const Args& a, ZeroPrecision precision, int stage,
                     const std::shared_ptr<Communicator>& world) {
  ZeroMeasured m;
  const int64_t start = held();
  Generator gen(1234);
  auto model = std::make_unique<gpt::GPT>(a.config, nn::BuildContext(gen));
  if (precision == ZeroPrecision::bf16) model->to(DType::bf16);
  m.params = held() - start;
  for (const Tensor& p : model->parameters()) m.psi += p.numel();

  Generator data(100 + uint64_t(world->rank()));  // each data rank its own batch
  const Tensor ids =
      randint(0, a.config.vocab_size, {a.batch, a.seq + 1}, {.dtype = DType::i64}, &data);
  const Tensor x = ids.narrow(1, 0, a.seq).contiguous();
  const Tensor y = ids.narrow(1, 1, a.seq).contiguous();
  {
    // A warm-up forward and backward without an engine, so kernels' lasting buffers are not
    // counted as model state; its gradients are released.
    Tensor loss = model->loss(x, y);
    autograd::backward({loss});
  }
  model->zero_grad();
  const int64_t built = held();
  m.workspace = built - start - m.params;

  train::UpdateEngineSpec spec = zero_adamw_spec(*model, world, stage);
  std::unique_ptr<train::UpdateEngine> engine = train::make_update_engine(spec);
  // The engine's allocation split in two: its f32 masters (or master shards), counted from the
  // tensors the optimizer steps that are not the model's own parameters, and the rest (data
  // parallelism's bucket buffers, stage 2's reducer), so the total stays the allocator's.
  const int64_t engine_bytes = held() - built;
  const std::vector<Tensor> model_params = model->parameters();
  for (const Tensor& t : engine->step_params()) {
    const bool own = std::any_of(model_params.begin(), model_params.end(),
                                 [&](const Tensor& p) { return p.is_same(t); });
    if (!own) m.masters += t.numel() * int64_t(t.itemsize());
  }
  m.buffers = engine_bytes - m.masters;
  if (stage == 3) {
    // At most live_params gathered and prefetch more in flight: the largest such set bounds it.
    std::vector<int64_t> sizes;
    for (const Tensor& p : model_params) sizes.push_back(int64_t(p.storage()->nbytes()));
    std::sort(sizes.rbegin(), sizes.rend());
    const size_t most = size_t(spec.zero3.live_params + spec.zero3.prefetch);
    for (size_t i = 0; i < std::min(most, sizes.size()); ++i) m.gather_bound += sizes[i];
    // The model's parameters were released, so the engine's allocation beyond the masters is the
    // compute shards less the released parameters (stage 3's reducer allocates its buckets in the
    // step): counted as the parameters this rank keeps. f32 parameters compute on their master
    // shards, which the formula counts as parameters (f32 parameters are their own masters).
    m.params += m.buffers;
    m.buffers = 0;
    if (precision == ZeroPrecision::f32) {
      m.params += m.masters;
      m.masters = 0;
    }
  }

  std::vector<double> times;
  for (int i = 0; i <= a.repeats; ++i) {
    world->barrier()->wait();
    world->reset_stats();
    const double t0 = now_s();
    const int64_t step_start = held();
    engine->set_grad_sync(true);
    {
      const auto gathers = engine->gather_window();  // stage 3 gathers on every rank
      Tensor loss = model->loss(x, y);
      autograd::backward({loss});
    }
    engine->finish_gradients();
    if (i == 0) m.grads = held() - step_start;
    const int64_t before_step = held();
    engine->step();
    if (i == 0) m.states = held() - before_step;
    engine->finish_step();
    if (i == 0) m.after_step = held() - step_start;
    const double local = now_s() - t0;
    m.step = world->stats();  // before max_over's all-reduce counts
    const double t = max_over(*world, local);
    if (i > 0) times.push_back(t);
  }
  std::sort(times.begin(), times.end());
  m.seconds = times[times.size() / 2];
  m.sent = m.step.total().bytes_sent;
  m.gathered = m.step[CommKind::broadcast].bytes_received;
  m.reduced = m.step[CommKind::reduce].bytes_sent;
  for (int64_t* v : {&m.params, &m.workspace, &m.masters, &m.buffers, &m.grads, &m.states,
                     &m.after_step, &m.sent, &m.gathered, &m.reduced})
    *v = int64_t(max_over(*world, double(*v)));
  engine.reset();
  model.reset();
  return m;
}

// Heterogeneous memory (zero.offload, zero.offload_params): where one f32 stage 3 run's bytes
// live, device (CPU domain 0) against host (the offload domain), on the busiest rank.
struct PlacementMeasured {
  int64_t device = 0;       // held on the device after the first step, over the model's build
  int64_t host = 0;         // held on the host after the first step, over the model's build
  int64_t device_peak = 0;  // the device's peak during a step, over the step's start
  double seconds = 0;
};

// The last two step during backward or after it, with buckets small enough that several reduce
// during backward (the default 25 MiB holds most of the default model).
enum class Placement { device, offload, offload_params, offload_small_buckets, offload_overlap };
constexpr int64_t kSmallBucketBytes = int64_t(2) << 20;

const char* placement_name(Placement p) {
  switch (p) {
    case Placement::device:
      return "stage 3";
    case Placement::offload:
      return "stage 3 + offload";
    case Placement::offload_params:
      return "stage 3 + offload + offload_params";
    case Placement::offload_small_buckets:
      return "stage 3 + offload, 2 MiB buckets";
    case Placement::offload_overlap:
      return "stage 3 + offload + overlap_step, 2 MiB buckets";
  }
  return "?";
}

PlacementMeasured measure_placement(const Args& a, Placement where,
                                    const std::shared_ptr<Communicator>& world) {
  const Device host = parallel::zero::offload_host_device(kCPU);
  auto host_held = [&] { return memory_stats(host).current_bytes; };
  PlacementMeasured m;
  // Counted from before the model is built: stage 3 releases the parameters it shards.
  const int64_t device_start = held(), host_start = host_held();
  Generator gen(1234);
  auto model = std::make_unique<gpt::GPT>(a.config, nn::BuildContext(gen));
  Generator data(100 + uint64_t(world->rank()));
  const Tensor ids =
      randint(0, a.config.vocab_size, {a.batch, a.seq + 1}, {.dtype = DType::i64}, &data);
  const Tensor x = ids.narrow(1, 0, a.seq).contiguous();
  const Tensor y = ids.narrow(1, 1, a.seq).contiguous();
  {
    Tensor loss = model->loss(x, y);  // kernels' lasting buffers, before anything is counted
    autograd::backward({loss});
  }
  model->zero_grad();
  train::UpdateEngineSpec spec = zero_adamw_spec(*model, world, 3);
  spec.zero_offload = where != Placement::device;
  if (where == Placement::offload_params)
    spec.zero3.placement = {.policy = parallel::zero::PlacementPolicy::static_share};
  if (where == Placement::offload_small_buckets || where == Placement::offload_overlap)
    spec.zero_bucket_bytes = kSmallBucketBytes;
  spec.zero_overlap_step = where == Placement::offload_overlap;
  std::unique_ptr<train::UpdateEngine> engine = train::make_update_engine(spec);
  std::vector<double> times;
  for (int i = 0; i <= a.repeats; ++i) {
    world->barrier()->wait();
    const double t0 = now_s();
    const int64_t step_start = held();
    reset_peak_memory(kCPU);
    engine->set_grad_sync(true);
    {
      const auto gathers = engine->gather_window();  // stage 3 gathers on every rank
      Tensor loss = model->loss(x, y);
      autograd::backward({loss});
    }
    engine->finish_gradients();
    engine->step();
    engine->finish_step();
    m.device_peak = std::max(m.device_peak, memory_stats(kCPU).peak_bytes - step_start);
    if (i == 0) {
      m.device = held() - device_start;
      m.host = host_held() - host_start;
    }
    const double t = max_over(*world, now_s() - t0);
    if (i > 0) times.push_back(t);
  }
  std::sort(times.begin(), times.end());
  m.seconds = times[times.size() / 2];
  for (int64_t* v : {&m.device, &m.host, &m.device_peak}) *v = int64_t(max_over(*world, double(*v)));
  return m;
}

std::string mb(double bytes) { return format_number(bytes / (1 << 20), 2); }
std::string ratio(double num, double den) { return den > 0 ? format_number(num / den, 3) : "-"; }
// "4.00 (4)": measured bytes per parameter beside the formula's.
std::string per_psi(int64_t bytes, int64_t psi, double formula) {
  return format_number(double(bytes) / double(psi), 2) + " (" + format_number(formula, 2) + ")";
}

// "12 all_reduce, 1 all_gather": the step's calls per kind, barriers left out.
std::string describe_calls(const CommStats& s) {
  std::string out;
  for (int k = 0; k < parallel::kNumCommKinds; ++k) {
    const int64_t calls = s.by_kind[size_t(k)].calls;
    if (calls == 0 || CommKind(k) == CommKind::barrier) continue;
    out += str_cat(out.empty() ? "" : ", ", calls, " ", parallel::comm_kind_name(CommKind(k)));
  }
  return out.empty() ? "none" : out;
}

// Threads per rank (--threads, or the cores divided among the ranks), set for the kernels; rank 0
// prints the header.
int start_bench(const std::shared_ptr<Communicator>& world, const Args& a) {
  const int n = world->size();
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = a.threads > 0 ? a.threads : std::max(1, cores / n);
  set_num_threads(threads);
  if (world->rank() == 0) {
    std::printf("# tessera bench zero: %d ranks, %s, %u hardware threads, load average %s\n", n,
                cpu_model().c_str(), std::thread::hardware_concurrency(), load_average().c_str());
  }
  return threads;
}

// The model-state table (one row per precision and stage) and its notes, built on every rank
// (each run is collective), printed by rank 0.
struct StateReport {
  Table table{{"precision", "stage", "N", "params B/Psi", "grads B/Psi", "states B/Psi",
               "masters B/Psi", "buffers B/Psi", "model state/rank (MB)", "ZeRO formula",
               "formula (MB)", "measured / formula", "step (ms)", "collectives", "sent/rank (B)",
               "DP ring 2 Psi (B)", "sent / ring"}};
  std::vector<std::string> notes;
};

// The ZeRO paper's stage 3 volume: two all-gathers of the parameters (forward, backward) and a
// reduce-scatter of the gradients, (N-1)/N of Psi each, in the bytes they move.
std::string stage3_volume_note(ZeroPrecision precision, const ZeroMeasured& m, int64_t psi, int n) {
  const int64_t itemsize = precision == ZeroPrecision::f32 ? 4 : 2;
  const double each = double(psi) * double(itemsize) * double(n - 1) / double(n);
  return str_cat(
      "- ", zero_precision_name(precision), " stage 3: its parameter gathers received ", m.gathered,
      " B per rank (", ratio(double(m.gathered), each),
      " x (N-1)/N Psi; forward and backward gather every weight, backward skips biases and "
      "norms it does not read) and its gradient reduces sent ",
      m.reduced, " B (", ratio(double(m.reduced), each),
      " x): ", ratio(double(m.gathered + m.reduced), each),
      " x (N-1)/N Psi against the ZeRO paper's 3. Gathered parameters at once: at most ",
      mb(double(m.gather_bound)),
      " MB (the live_params + prefetch largest), not in the "
      "model state (the step's working set).");
}

// One (precision, stage) run: its row beside the formula and its notes.
void add_stage(StateReport& report, const std::shared_ptr<Communicator>& world, const Args& a,
               ZeroPrecision precision, int stage, int64_t psi) {
  const int n = world->size();
  const int64_t itemsize = precision == ZeroPrecision::f32 ? 4 : 2;
  const StateTerms f = zero_formula(precision, stage, n);
  const std::string text = zero_formula_text(precision, stage);
  const double formula_bytes = f.total() * double(psi);
  const int64_t ring = dp_ring_bytes(psi, itemsize, n);
  const ZeroMeasured m = measure(a, precision, stage, world);
  TS_CHECK(m.psi == psi, "bench zero", "the model holds ", m.psi, " parameters, expected ", psi);
  const int64_t total = m.params + m.grads + m.states + m.masters + m.buffers;
  report.table.add_row({zero_precision_name(precision), std::to_string(stage), std::to_string(n),
                        per_psi(m.params, psi, f.params), per_psi(m.grads, psi, f.grads),
                        per_psi(m.states, psi, f.states), per_psi(m.masters, psi, f.masters),
                        per_psi(m.buffers, psi, 0), mb(double(total)), text, mb(formula_bytes),
                        ratio(double(total), formula_bytes), format_number(m.seconds * 1e3, 1),
                        describe_calls(m.step), std::to_string(m.sent), std::to_string(ring),
                        ratio(double(m.sent), double(ring))});
  report.notes.push_back(str_cat("- ", zero_precision_name(precision), " stage ", stage,
                                 ": held after the first step's finish_step ",
                                 mb(double(m.after_step)),
                                 " MB over its start (gradients released, optimizer state kept); "
                                 "warm-up workspace ",
                                 mb(double(m.workspace)), " MB, not counted."));
  if (stage == 3) report.notes.push_back(stage3_volume_note(precision, m, psi, n));
}

StateReport measure_model_state(const std::shared_ptr<Communicator>& world, const Args& a,
                                int64_t psi) {
  StateReport report;
  for (size_t c = 2; c < 17; ++c)
    if (c != 9 && c != 13) report.table.align_right(c);
  for (ZeroPrecision precision : a.precisions)
    for (int stage = 0; stage <= 3; ++stage) add_stage(report, world, a, precision, stage, psi);
  return report;
}

void print_model_state(const StateReport& report, const Args& a, int64_t psi, int n, int threads) {
  std::printf(
      "\n## ZeRO model state per rank, GPT %s (%lld layers, C=%lld, %lld heads, vocabulary "
      "%lld; Psi = %lld parameters), AdamW; B=%lld, T=%lld per rank; %d data ranks, %d "
      "threads per rank\n\n%s\n",
      a.model.c_str(), static_cast<long long>(a.config.n_layers),
      static_cast<long long>(a.config.d_model), static_cast<long long>(a.config.n_heads),
      static_cast<long long>(a.config.vocab_size), static_cast<long long>(psi),
      static_cast<long long>(a.batch), static_cast<long long>(a.seq), n, threads,
      report.table.render().c_str());
  std::printf(
      "- B/Psi cells: measured bytes per parameter on the busiest rank (the formula's term in "
      "parentheses). params: allocator bytes the model holds once built (bf16: converted); stage "
      "3: "
      "what this rank keeps of them once the engine released them, its shard (bf16: its own "
      "bf16 shard; f32: its f32 master shard, so masters shows 0). "
      "grads: bytes held after the first step's gradient reduction (finish_gradients, before "
      "the optimizer step) over the step's start: every gradient tensor the step then keeps "
      "(the model's .grad(), f32 master gradients, shard gradients). states: bytes the first "
      "AdamW step allocated (m and v). masters: the f32 tensors the optimizer steps that are not "
      "the model's parameters (f32 master copies or shards), by their sizes. buffers: the rest "
      "of what the update engine allocated when built (data parallelism's flat gradient "
      "buckets, kept between steps; no formula term, so 0). model state = the allocator's "
      "sum of params, grads, states and the engine's allocation (masters + buffers).\n"
      "- ZeRO formula (issue 12; tools/bench/zero_plan.h): f32 AdamW counts parameters 4, "
      "gradients 4, m and v 8 bytes per parameter and no master (f32 parameters are their own "
      "masters); bf16 counts 2 + 2 + 12 (m, v and the f32 master). Stage 1 shards states and "
      "masters over N, stage 2 also gradients, stage 3 also parameters. A term above its formula "
      "is memory this "
      "implementation keeps that the paper's accounting does not.\n"
      "- sent/rank: bytes the busiest rank sends in one step by the data group's counters "
      "(ring algorithms, parallel/comm/comm_types.h: all_reduce 2(N-1)/N, all_gather (N-1)/N "
      "of the output, reduce: each non-owner sends its part, broadcast: the root sends it); DP "
      "ring 2 Psi = floor(2(N-1)/N x "
      "Psi x gradient itemsize). Times: median of %d steps after the measured first, slowest "
      "rank; CPU times are indicative, bytes are exact.\n",
      a.repeats);
  for (const std::string& line : report.notes) std::printf("%s\n", line.c_str());
}

// Where f32 stage 3's model state lives with offload and parameter offload (static, every chunk
// on the host): the device keeps only the step's working set. Collective; rank 0 prints.
Table measure_placements(const std::shared_ptr<Communicator>& world, const Args& a, int64_t psi) {
  const int n = world->size();
  Table placement({"placement", "N", "device B/Psi", "host B/Psi", "device peak in a step (MB)",
                   "step (ms)", "step / stage 3"});
  for (size_t c = 1; c < 7; ++c) placement.align_right(c);
  double base = 0;
  for (Placement where : {Placement::device, Placement::offload, Placement::offload_params,
                          Placement::offload_small_buckets, Placement::offload_overlap}) {
    const PlacementMeasured m = measure_placement(a, where, world);
    if (where == Placement::device) base = m.seconds;
    placement.add_row({placement_name(where), std::to_string(n),
                       format_number(double(m.device) / double(psi), 2),
                       format_number(double(m.host) / double(psi), 2), mb(double(m.device_peak)),
                       format_number(m.seconds * 1e3, 1), ratio(m.seconds, base)});
  }
  return placement;
}

void print_placements(const Table& placement) {
  std::printf(
      "\n## Heterogeneous memory: f32 stage 3 with zero.offload and zero.offload_params "
      "(static, every parameter chunk on the host)\n\n%s\n"
      "- device / host B/Psi: bytes per parameter the busiest rank holds after the first step "
      "(its gradients released), counted from before the model was built, on the device (CPU "
      "domain 0) and in the offload host domain (counted apart by the allocator). Stage 3 keeps "
      "its f32 shard and AdamW state, 12 / N, on the device; offload moves the masters and the "
      "state to the host and keeps a device copy of the compute shard (4 / N); offload_params "
      "moves that too, so the device keeps none. device peak: the most a step adds on the "
      "device (activations, gathered parameters, gradients in flight). overlap_step: the host "
      "steps each shard range as its bucket is reduced, on a worker thread, while backward "
      "goes on (same numbers); on a GPU the backward leaves the host's cores free for it, "
      "here the two share the CPU's cores.\n",
      placement.render().c_str());
}

int bench_zero(const std::shared_ptr<Communicator>& world, const Args& a) {
  const int threads = start_bench(world, a);
  if (a.device_limit > 0) {
    print_largest_under_limit({.config = a.config,
                               .batch = a.batch,
                               .seq = a.seq,
                               .device_limit = a.device_limit,
                               .max_layers = a.max_layers},
                              world);
    return 0;
  }
  const int64_t psi = gpt::gpt_num_parameters(a.config);
  const StateReport state = measure_model_state(world, a, psi);
  if (world->rank() == 0) print_model_state(state, a, psi, world->size(), threads);
  const Table placement = measure_placements(world, a, psi);
  if (world->rank() == 0) print_placements(placement);
  return 0;
}

}  // namespace

int run_zero_command(int argc, char** argv, int first) {
  const std::optional<Args> parsed = parse_on_every_rank(parse_args, argc, argv, first);
  if (!parsed) return 2;
  const Args& args = *parsed;
  return parallel::run_distributed(argc, argv, [&](const std::shared_ptr<Communicator>& world) {
    return bench_zero(world, args);
  });
}

}  // namespace tessera::bench

// Tessera's side of `bench tp`: a transformer block (forward + backward) and a GPT training step
// timed under a tensor-parallel layout, with its groups' byte counters and the allocator's memory
// counters.
#include "tools/bench/tp_bench.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "core/allocator.h"
#include "core/factory.h"
#include "models/gpt/gpt.h"
#include "models/nn/parallel/linear_3d.h"
#include "optim/adam.h"

namespace tessera::bench {
namespace {

using parallel::Communicator;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The maximum over the group (the value itself without one): a step is as slow as its slowest
// rank, and the busiest rank bounds the memory a layout needs.
double max_over(Communicator* group, double v) {
  if (group == nullptr) return v;
  Tensor t = from_vector<double>({v}, {1});
  group->all_reduce(t, parallel::ReduceOp::max)->wait();
  return t.item();
}

void add_stats(parallel::CommStats& into, const parallel::CommStats& s) {
  for (size_t k = 0; k < into.by_kind.size(); ++k) into.by_kind[k] += s.by_kind[k];
}

parallel::CommStats summed_stats(const TpGroups& groups) {
  parallel::CommStats total;
  for (Communicator* g : groups.counted) add_stats(total, g->stats());
  return total;
}

// This rank's piece of x (B, T, C) in the layout's activation layout, cut without communication:
// 2D / 2.5D the block (B / (d q), T, C / q) at (batch index, grid column); 3D the piece
// (B / q, T, C / q^2) at (i, feature chunk k q + j); x itself otherwise.
Tensor local_piece(const Tensor& x, const nn::BuildContext& ctx) {
  const int64_t b = x.size(0), c = x.size(2);
  if (ctx.tensor_2d()) {
    const parallel::tensor::SummaGrid g = ctx.summa_grid();
    const int64_t rows = b / g.batch_parts(), cols = c / g.q();
    return x.narrow(0, g.batch_index() * rows, rows)
        .narrow(2, g.grid_col() * cols, cols)
        .contiguous();
  }
  if (ctx.tensor_3d()) {
    const parallel::tensor::CubeCoords at = ctx.cube("bench tp").coords();
    const int64_t rows = b / at.q, cols = c / (int64_t(at.q) * at.q);
    return x.narrow(0, at.i * rows, rows).narrow(2, at.feature_chunk() * cols, cols).contiguous();
  }
  return x;
}

// Bytes of `module`'s parameters that its placements replicate.
int64_t replicated_bytes(const nn::Module& module) {
  int64_t bytes = 0;
  const auto params = module.named_parameters();
  const auto placements = module.named_placements();
  for (size_t i = 0; i < params.size(); ++i)
    if (placements[i].second.replicated())
      bytes += params[i].second.numel() * int64_t(params[i].second.itemsize());
  return bytes;
}

// A step split in two so the forward's activations and collectives can be read on their own.
struct StepFns {
  std::function<void()> zero_grad;
  std::function<void()> forward;   // keeps what backward needs
  std::function<void()> backward;  // and the optimizer, where there is one
};

// Runs 1 + repeats steps under `groups` (none: this rank alone) and measures them; the first warms
// up allocations and packing buffers and is not timed.
TpMeasured run_steps(const StepFns& fns, const TpGroups& groups, int repeats, TpMeasured m) {
  Communicator* group = groups.sync;
  std::vector<double> times;
  for (int i = 0; i <= repeats; ++i) {
    if (group) group->barrier()->wait();
    const double start = now_s();
    fns.zero_grad();
    for (Communicator* g : groups.counted) g->reset_stats();
    reset_peak_memory(kCPU);
    const int64_t held = memory_stats(kCPU).current_bytes;
    fns.forward();
    m.activation_bytes = memory_stats(kCPU).peak_bytes - held;
    m.forward = summed_stats(groups);
    fns.backward();
    const double local = now_s() - start;
    m.peak_bytes = memory_stats(kCPU).peak_bytes;
    m.step = summed_stats(groups);
    const double t = max_over(group, local);
    if (i > 0) times.push_back(t);
  }
  std::sort(times.begin(), times.end());
  m.seconds = times[times.size() / 2];
  for (int64_t* v : {&m.param_bytes, &m.replicated_bytes, &m.activation_bytes, &m.peak_bytes})
    *v = int64_t(max_over(group, double(*v)));
  return m;
}

}  // namespace

TpGroups tp_groups(const nn::BuildContext& ctx) {
  TpGroups groups;
  const parallel::ParallelContext* pc = ctx.parallel();
  if (pc == nullptr || !ctx.tensor_parallel()) return groups;
  groups.sync = pc->tensor_group().get();
  for (const std::string& name : pc->group_names()) {
    Communicator* g = pc->group(name).get();
    if (std::find(groups.counted.begin(), groups.counted.end(), g) == groups.counted.end())
      groups.counted.push_back(g);
  }
  return groups;
}

TpMeasured measure_tp_block(const TpShape& a, const nn::BuildContext& ctx) {
  const nn::BlockSpec spec{
      .d_model = a.d_model, .n_heads = a.heads, .causal = true, .pre_ln = true};
  TpMeasured m;
  const int64_t before = memory_stats(kCPU).current_bytes;
  std::shared_ptr<nn::Block> block = nn::make_block(spec, ctx);
  m.param_bytes = memory_stats(kCPU).current_bytes - before;
  m.replicated_bytes = replicated_bytes(*block);
  Generator data(5);
  // (B, T, C), the same on every rank; this rank's piece of it.
  Tensor x = local_piece(randn({a.batch, a.seq, a.d_model}, {}, &data), ctx);
  x.set_requires_grad(true);
  const Tensor dy = ones(x.shape());
  Tensor y;
  StepFns fns{[&] { block->zero_grad(); }, [&] { y = block->forward(x); },
              [&] {
                autograd::backward({y}, {dy});
                y = Tensor();
              }};
  return run_steps(fns, tp_groups(ctx), a.repeats, m);
}

TpMeasured measure_tp_step(const TpShape& a, const gpt::GPTConfig& config,
                           const nn::BuildContext& ctx) {
  TpMeasured m;
  const int64_t before = memory_stats(kCPU).current_bytes;
  auto model = std::make_unique<gpt::GPT>(config, ctx);
  m.param_bytes = memory_stats(kCPU).current_bytes - before;
  m.replicated_bytes = replicated_bytes(*model);
  optim::AdamW opt(model->parameters(), optim::AdamWOptions{.lr = 1e-4});
  Generator data(99);  // the same batch on every rank of the tensor group
  const Tensor ids =
      randint(0, config.vocab_size, {a.batch, a.seq + 1}, {.dtype = DType::i64}, &data);
  const Tensor x = ids.narrow(1, 0, a.seq).contiguous();  // (B, T)
  const Tensor y = ids.narrow(1, 1, a.seq).contiguous();  // (B, T)
  Tensor loss;
  StepFns fns{[&] { opt.zero_grad(); }, [&] { loss = model->loss(x, y); },
              [&] {
                autograd::backward({loss});
                opt.step();
                loss = Tensor();
              }};
  return run_steps(fns, tp_groups(ctx), a.repeats, m);
}

}  // namespace tessera::bench

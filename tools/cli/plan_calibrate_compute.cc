// The compute measurements of `tessera plan calibrate`, each through the kernel API the layers
// call (kernels/kernels.h), on preallocated operands. Each is the fastest of its repetitions:
// other processes and the hypervisor only ever add time, and the FMA peak the efficiencies divide
// by is a best-of too, so the two stay comparable on a busy machine.
#include "tools/cli/plan_calibrate_compute.h"

#include <algorithm>
#include <functional>
#include <tuple>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "core/factory.h"
#include "kernels/kernels.h"
#include "models/gpt/gpt.h"
#include "models/plan/host_probe.h"
#include "tools/bench/timer.h"

namespace tessera::cli {
namespace {

using bench::TimingOptions;

TimingOptions timing(bool quick) {
  return quick ? TimingOptions{1, 0.005, 3, 20} : TimingOptions{1, 0.15, 5, 50};
}

// The fastest call of `fn` after the warm-up calls, repeating until both the time budget and the
// repetition count of `opts` are met (tools/bench/timer.h's protocol, keeping the minimum).
double best_seconds(const std::function<void()>& fn, const TimingOptions& opts) {
  for (int i = 0; i < opts.warmup; ++i) fn();
  double best = 1e300, spent = 0;
  for (int reps = 0; reps < opts.max_reps && (reps < opts.min_reps || spent < opts.min_seconds);
       ++reps) {
    const double t = bench::detail::seconds_of(fn);
    best = std::min(best, t);
    spent += t;
  }
  return best;
}

struct Shape3 {
  int64_t m, k, n;
};

// The products of a transformer layer over `tokens` rows of width C: the fused q|k|v projection
// (C -> 3C), the MLP's up (C -> 4C) and down (4C -> C) projections, and the LM head (C -> V).
std::vector<Shape3> layer_shapes(bool quick) {
  // 32 rows: a tiny model's batch, where the kernels' fixed costs show.
  const std::vector<int64_t> tokens =
      quick ? std::vector<int64_t>{16, 64} : std::vector<int64_t>{32, 256, 1024};
  const std::vector<int64_t> widths =
      quick ? std::vector<int64_t>{64, 128} : std::vector<int64_t>{64, 128, 256, 512, 768, 1024};
  const int64_t vocab = quick ? 512 : 8192;
  std::vector<Shape3> shapes;
  for (int64_t t : tokens) {
    for (int64_t c : widths) {
      shapes.push_back({t, c, 3 * c});
      shapes.push_back({t, c, 4 * c});
      shapes.push_back({t, 4 * c, c});
      // The head is the largest product; once per width, at the middle token count, keeps the
      // sweep within its time.
      if (t == tokens[tokens.size() / 2]) shapes.push_back({t, c, vocab});
    }
  }
  return shapes;
}

// Seconds per (m, k) @ (k, n) in `dtype` through kernels::matmul (16-bit operands go through f32
// there, as they do in training on the CPU).
double time_matmul(const Shape3& s, DType dtype, bool quick) {
  Generator gen(7);
  const Tensor a = randn({s.m, s.k}, {.dtype = dtype}, &gen);
  const Tensor b = randn({s.k, s.n}, {.dtype = dtype}, &gen);
  const Tensor out = empty({s.m, s.n}, {.dtype = dtype});
  return best_seconds([&] { kernels::matmul(a, b, out); }, timing(quick));
}

double flops_of(const Shape3& s) { return 2.0 * double(s.m) * double(s.k) * double(s.n); }

// Causal fused attention, forward then backward, as a GPT block runs it. FLOPs as
// flash-attention's benchmark counts them: 4 B H T^2 D for the forward, halved by the causal mask,
// and 2.5 times that for the backward.
double attention_efficiency(bool quick, double peak) {
  const int64_t b = 1, h = quick ? 2 : 4, t = quick ? 64 : 512, d = quick ? 32 : 64;
  Generator gen(11);
  const Tensor q = randn({b, h, t, d}, {}, &gen), k = randn({b, h, t, d}, {}, &gen),
               v = randn({b, h, t, d}, {}, &gen), grad_out = randn({b, h, t, d}, {}, &gen);
  const Tensor out = empty({b, h, t, d}), lse = empty({b, h, t});
  const Tensor gq = empty({b, h, t, d}), gk = empty({b, h, t, d}), gv = empty({b, h, t, d});
  kernels::AttentionOptions opts;
  opts.causal = true;
  const double seconds = best_seconds(
      [&] {
        kernels::attention_forward(q, k, v, Tensor(), opts, out, lse);
        kernels::attention_backward(q, k, v, out, lse, grad_out, Tensor(), opts, gq, gk, gv);
      },
      timing(quick));
  const double forward = 4.0 * double(b * h * t * t * d) / 2.0;
  return 3.5 * forward / seconds / peak;
}

// An f32 add over arrays far beyond the caches: bytes moved (two reads, a write) per second.
double add_bandwidth(bool quick) {
  const int64_t n = quick ? int64_t(1) << 22 : int64_t(1) << 24;
  const Tensor a = full({n}, 1.0), b = full({n}, 2.0), out = empty({n});
  const double seconds =
      best_seconds([&] { kernels::binary(kernels::BinaryOp::add, a, b, out); }, timing(quick));
  return 3.0 * double(n) * sizeof(float) / seconds;
}

// One op as training runs it, on a 1-element tensor: the forward through the public op API
// (validation, allocation, dispatch, recording its autograd node) and its share of the backward
// pass (the engine's scheduling, the node's gradient op, accumulation), per op: what an op costs
// beyond its FLOPs and bytes.
double op_overhead(bool quick) {
  const Tensor x = full({1}, 1.0, {.requires_grad = true}), b = full({1}, 2.0);
  const int chain = quick ? 50 : 500;
  const double seconds = best_seconds(
      [&] {
        Tensor y = x;
        for (int i = 0; i < chain; ++i) y = add(y, b);
        autograd::backward({sum(y)});
        x.set_grad(Tensor());
      },
      timing(quick));
  return seconds / (2.0 * chain);  // a forward op and its backward op each
}

// Seconds of one loss forward + backward of a GPT of `layers` blocks so narrow (width 8, one
// head, 8 positions) that its FLOPs and bytes are nothing: what the modules, the autograd graph
// and the small kernels cost per micro-batch.
double tiny_step_seconds(int layers, bool quick) {
  gpt::GPTConfig config;
  config.vocab_size = 16, config.context_length = 8, config.n_layers = layers;
  config.n_heads = 1, config.d_model = 8;
  Generator gen(7);
  gpt::GPT model(config, nn::BuildContext(gen));
  model.train();
  const Tensor ids = zeros({1, 8}, {.dtype = DType::i64});
  return best_seconds(
      [&] {
        for (int i = 0; i < 10; ++i) {
          autograd::backward({model.loss(ids, ids)});
          for (const Tensor& p : model.parameters()) p.set_grad(Tensor());
        }
      },
      timing(quick)) / 10;
}

// A block's overhead from the slope over 1 and 3 blocks; the micro-batch's from the intercept.
std::pair<double, double> model_overheads(bool quick) {
  const double one = tiny_step_seconds(1, quick), three = tiny_step_seconds(3, quick);
  const double block = std::max(0.0, (three - one) / 2);
  return {block, std::max(0.0, one - block)};
}

double adam_params_per_s(bool quick) {
  const int64_t n = quick ? int64_t(1) << 18 : int64_t(1) << 22;
  const Tensor param = full({n}, 0.5), grad = full({n}, 1e-3), m = zeros({n}), v = zeros({n});
  kernels::AdamStep step;
  step.weight_decay = 0.01f;
  const double seconds =
      best_seconds([&] { kernels::adam_update(param, grad, m, v, step); }, timing(quick));
  return double(n) / seconds;
}

}  // namespace

ComputeMeasurements measure_compute(const ComputeOptions& options) {
  ComputeMeasurements r;
  r.threads = std::max(1, options.threads);
  plan::ScopedThreads scope(r.threads);
  const bool quick = options.quick;
  r.core_peak_flops = plan::measure_core_peak_flops(0.001, quick ? 30 : 200);
  const double peak = r.core_peak_flops * r.threads;
  r.memory_bandwidth =
      plan::measure_memory_bandwidth(r.threads, int64_t(quick ? 16 : 64) << 20, quick ? 4 : 10);

  const std::vector<Shape3> shapes = layer_shapes(quick);
  Shape3 largest{0, 0, 0};  // the largest layer product, the LM head aside
  for (const Shape3& s : shapes) {
    const double speed = flops_of(s) / time_matmul(s, DType::f32, quick);
    r.gemm.push_back({flops_of(s), speed / peak});
    r.rows.push_back({"f32", s.m, s.k, s.n, speed, speed / peak});
    if (s.n <= 4 * s.k && flops_of(s) > flops_of(largest)) largest = s;
  }
  // The 16-bit peaks: the f32 peak scaled by their GEMM speed against f32's on one layer shape.
  const double f32_speed = flops_of(largest) / time_matmul(largest, DType::f32, quick);
  for (auto [dtype, ratio, name] : {std::tuple{DType::bf16, &r.bf16_ratio, "bf16"},
                                    std::tuple{DType::f16, &r.f16_ratio, "f16"}}) {
    const double speed = flops_of(largest) / time_matmul(largest, dtype, quick);
    *ratio = speed / f32_speed;
    r.rows.push_back({name, largest.m, largest.k, largest.n, speed, speed / peak});
  }
  r.attention_efficiency = attention_efficiency(quick, peak);
  r.elementwise_efficiency = add_bandwidth(quick) / r.memory_bandwidth;
  r.launch_overhead_s = op_overhead(quick);
  std::tie(r.block_overhead_s, r.micro_batch_overhead_s) = model_overheads(quick);
  r.adam_params_per_s = adam_params_per_s(quick);
  return r;
}

}  // namespace tessera::cli

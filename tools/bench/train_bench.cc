// Tessera side of `bench train`: a fresh GPT and AdamW per shape, timed steps, memory peaks.
#include "tools/bench/train_bench.h"

#include <cmath>
#include <functional>
#include <string>

#include "autograd/engine.h"
#include "core/allocator.h"
#include "core/error.h"
#include "core/factory.h"
#include "core/profiler.h"
#include "models/gpt/gpt.h"
#include "optim/adam.h"
#include "tools/bench/system_info.h"
#include "tools/bench/timer.h"

namespace tessera::bench {
namespace {

// One more step under the profiler, after the timed ones, so the profile never perturbs them.
std::string profile_one_step(const std::function<void()>& step, const TrainShape& shape,
                             const TrainBenchOptions& opts) {
  const std::string shape_tag = std::to_string(shape.batch) + "x" + std::to_string(shape.seq);
  std::string path = opts.profile_path;
  const size_t dot = path.find_last_of('.'), slash = path.find_last_of('/');
  if (dot != std::string::npos && (slash == std::string::npos || dot > slash))
    path = path.substr(0, dot) + "." + shape_tag + path.substr(dot);
  else
    path += "." + shape_tag;
  profiler::start();
  step();
  const std::vector<profiler::Event> events = profiler::stop();
  profiler::write_chrome_trace(path, events, 0);
  int64_t step_ns = 0;
  for (const profiler::Event& e : events)
    if (e.name == "train_step") step_ns += e.dur_ns;
  return "profile of one " + shape_tag + " step (trace in " + path + "), time by family:\n" +
         profiler::format_summary(profiler::summarize(events), step_ns);
}

}  // namespace

TrainStepResult time_train_step(const gpt::GPTConfig& config, const TrainShape& shape,
                                const TrainBenchOptions& opts) {
  TS_CHECK(shape.batch > 0 && shape.seq > 0 && shape.seq <= config.context_length, "bench train",
           "expected 0 < T <= context_length ", config.context_length, " and B > 0, got B=",
           shape.batch, " T=", shape.seq);
  TS_CHECK(opts.warmup >= 0 && opts.steps > 0, "bench train",
           "expected warmup >= 0 and steps > 0, got ", opts.warmup, " and ", opts.steps);
  // Peaks cover the whole life of this shape's model: weights, gradients, Adam state, activations.
  reset_peak_rss();
  reset_peak_memory(kCPU);
  TrainStepResult r;
  {
    Generator init(1234);
    gpt::GPT model(config, init);
    model.train();
    optim::AdamW opt(model.parameters(),
                     optim::AdamWOptions{.lr = opts.lr, .weight_decay = opts.weight_decay});
    Generator data(99);
    const Tensor ids =
        randint(0, config.vocab_size, {shape.batch, shape.seq + 1}, {.dtype = DType::i64}, &data);
    const Tensor x = ids.narrow(1, 0, shape.seq).contiguous();  // (B, T)
    const Tensor y = ids.narrow(1, 1, shape.seq).contiguous();  // (B, T)
    auto step = [&] {
      TS_PROFILE("train_step", "step");
      opt.zero_grad();
      Tensor loss;
      {
        TS_PROFILE("forward", "step");
        loss = model.loss(x, y);
      }
      {
        TS_PROFILE("backward", "step");
        autograd::backward({loss});
      }
      {
        TS_PROFILE("optimizer", "step");
        opt.step();
      }
      r.last_loss = loss.item();
    };
    r.step_seconds = median_seconds(step, {.warmup = opts.warmup,
                                           .min_seconds = 0.0,
                                           .min_reps = opts.steps,
                                           .max_reps = opts.steps});
    if (!opts.profile_path.empty()) r.profile_report = profile_one_step(step, shape, opts);
  }
  TS_CHECK(std::isfinite(r.last_loss), "bench train", "expected a finite loss, got ",
           r.last_loss);
  r.peak_alloc_bytes = memory_stats(kCPU).peak_bytes;
  r.peak_rss_bytes = peak_rss_bytes();
  return r;
}

}  // namespace tessera::bench

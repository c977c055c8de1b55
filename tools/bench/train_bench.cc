// Tessera side of `bench train`: a fresh GPT and AdamW per shape, timed steps, memory peaks.
#include "tools/bench/train_bench.h"

#include <cmath>

#include "autograd/engine.h"
#include "core/allocator.h"
#include "core/error.h"
#include "core/factory.h"
#include "models/gpt/gpt.h"
#include "optim/adam.h"
#include "tools/bench/system_info.h"
#include "tools/bench/timer.h"

namespace tessera::bench {

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
      opt.zero_grad();
      const Tensor loss = model.loss(x, y);
      autograd::backward({loss});
      opt.step();
      r.last_loss = loss.item();
    };
    r.step_seconds = median_seconds(step, {.warmup = opts.warmup,
                                           .min_seconds = 0.0,
                                           .min_reps = opts.steps,
                                           .max_reps = opts.steps});
  }
  TS_CHECK(std::isfinite(r.last_loss), "bench train", "expected a finite loss, got ",
           r.last_loss);
  r.peak_alloc_bytes = memory_stats(kCPU).peak_bytes;
  r.peak_rss_bytes = peak_rss_bytes();
  return r;
}

}  // namespace tessera::bench

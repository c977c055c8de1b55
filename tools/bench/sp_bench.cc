// Tessera's side of `bench sp` (see sp_bench.h).
#include "tools/bench/sp_bench.h"

#include <chrono>
#include <optional>

#include "autograd/engine.h"
#include "core/allocator.h"
#include "core/factory.h"
#include "core/generator.h"
#include "models/gpt/gpt.h"
#include "models/nn/build_context.h"
#include "parallel/mesh/parallel_context.h"

namespace tessera::bench {

std::string SpLayout::name() const {
  switch (kind) {
    case Kind::sequence:
      return "sp " + mode;
    case Kind::tensor:
      return "tp 1d";
    default:
      return "one rank";
  }
}

namespace {

// The step on this rank: activation bytes and seconds. context: null for one rank.
SpMeasured step_on_rank(const gpt::GPTConfig& config, int64_t micro,
                        const parallel::ParallelContext* context) {
  Generator gen(1234);
  gpt::GPT model(config, nn::BuildContext(gen, context));
  const int64_t t = config.context_length;
  Generator data(99);
  const Tensor ids = randint(0, config.vocab_size, {micro, t + 1}, {.dtype = DType::i64}, &data);
  auto step = [&](int64_t length) {
    const Tensor input = ids.narrow(1, 0, length).contiguous();   // (B, T)
    const Tensor target = ids.narrow(1, 1, length).contiguous();  // (B, T)
    autograd::backward({model.loss(input, target)});
  };
  // The gradients, allocated by a short step and zeroed in place, are held before the measured
  // one, so its peak counts activations, saved tensors, transfer buffers and scratch only.
  const int parts =
      context ? std::max(context->config().sequence, context->config().tensor.size) : 1;
  step(std::min<int64_t>(t, 2 * parts));
  model.zero_grad(/*set_to_none=*/false);
  reset_peak_memory(kCPU);
  const int64_t held = memory_stats(kCPU).current_bytes;
  const auto t0 = std::chrono::steady_clock::now();
  step(t);
  SpMeasured m;
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  m.activation_bytes = memory_stats(kCPU).peak_bytes - held;
  return m;
}

}  // namespace

SpMeasured measure_sp_step(const gpt::GPTConfig& config, int64_t micro, const SpLayout& layout,
                           const std::shared_ptr<parallel::Communicator>& world) {
  SpMeasured m;
  world->barrier()->wait();
  if (layout.kind == SpLayout::Kind::single) {
    if (world->rank() == 0) m = step_on_rank(config, micro, nullptr);
  } else {
    parallel::ParallelConfig pc;
    if (layout.kind == SpLayout::Kind::sequence) {
      pc.sequence = world->size();
      pc.sequence_mode = parallel::sequence::parse_mode(layout.mode);
    } else {
      pc.tensor.size = world->size();
      pc.tensor.mode = parallel::TensorMode::one_d;
    }
    const parallel::ParallelContext context(pc, world);
    m = step_on_rank(config, micro, &context);
  }
  // The busiest rank's bytes and the slowest rank's time (nanoseconds), on every rank.
  Tensor v = from_vector<int64_t>({m.activation_bytes, int64_t(m.seconds * 1e9)}, {2});
  world->all_reduce(v, parallel::ReduceOp::max)->wait();
  return {.activation_bytes = v.data<int64_t>()[0], .seconds = double(v.data<int64_t>()[1]) * 1e-9};
}

}  // namespace tessera::bench

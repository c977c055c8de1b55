// Tessera's side of `bench pp` (see pp_bench.h).
#include "tools/bench/pp_bench.h"

#include <chrono>

#include "core/allocator.h"
#include "core/factory.h"
#include "core/generator.h"
#include "models/gpt/gpt.h"
#include "models/nn/build_context.h"
#include "parallel/mesh/parallel_context.h"
#include "parallel/pipeline/executor.h"

namespace tessera::bench {

namespace pp = parallel::pipeline;

std::vector<StepRecord> measure_pp(const PpShape& a, const pp::ScheduleSpec& spec,
                                   const std::shared_ptr<parallel::Communicator>& world) {
  parallel::ParallelConfig pc;
  pc.pipeline = spec.stages;
  pc.pipeline_options.schedule = spec.kind;
  pc.pipeline_options.virtual_stages = spec.virtual_stages;
  const parallel::ParallelContext context(pc, world);

  gpt::GPTConfig config;
  config.vocab_size = a.vocab;
  config.context_length = a.seq;
  config.n_layers = a.blocks;
  config.n_heads = a.heads;
  config.d_model = a.width;
  Generator gen(1234);
  auto model = std::make_unique<gpt::GPT>(config, nn::BuildContext(gen, &context));
  const nn::PipelineStage& stage = model->stage();
  pp::PipelineExecutor executor(context.pipeline_group(), spec);

  // The step's micro-batches, the same on every rank: stage 0 reads the ids, the last the targets.
  Generator data(99);
  std::vector<Tensor> inputs, targets;
  for (int m = 0; m < spec.micro_batches; ++m) {
    const Tensor ids = randint(0, a.vocab, {a.micro, a.seq + 1}, {.dtype = DType::i64}, &data);
    inputs.push_back(ids.narrow(1, 0, a.seq).contiguous());   // (B, T)
    targets.push_back(ids.narrow(1, 1, a.seq).contiguous());  // (B, T)
  }
  // As the trainer's pipeline step (models/train/pipeline_step.cc): the last chunk returns the
  // micro-batch's mean loss, which the executor backpropagates.
  pp::StageCallbacks callbacks;
  callbacks.forward = [&](int chunk, int m, const Tensor& input) {
    return model->stage_forward(chunk, stage.first_chunk(chunk) ? inputs[size_t(m)] : input,
                                stage.last_chunk(chunk) ? targets[size_t(m)] : Tensor());
  };

  std::vector<StepRecord> records;
  for (int i = 0; i < a.warmup + a.steps; ++i) {
    model->zero_grad(/*set_to_none=*/false);
    world->barrier()->wait();
    reset_peak_memory(kCPU);
    const int64_t held = memory_stats(kCPU).current_bytes;
    const auto t0 = std::chrono::steady_clock::now();
    executor.run(callbacks);
    StepRecord r;
    r.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.activation_bytes = memory_stats(kCPU).peak_bytes - held;
    for (const pp::ActionTiming& t : executor.timings())
      add_action(r, t.action.type, t.end - t.start);
    if (i >= a.warmup) records.push_back(r);
  }
  return records;
}

}  // namespace tessera::bench

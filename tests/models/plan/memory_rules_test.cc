// The memory model's layer rules against the allocator: a serial GPT's forward keeps what the
// planner says it keeps (its activations), and the peak of its forward and backward is the
// planner's peak less the optimizer's state, at several widths, depths, heads and batches.
#include <catch2/catch.hpp>

#include "autograd/engine.h"
#include "core/allocator.h"
#include "core/factory.h"
#include "models/gpt/gpt.h"
#include "models/plan/memory_model.h"
#include "models/plan/workload.h"
#include "models/train/train_config.h"

using namespace tessera;

namespace {

struct GptShape {
  int64_t vocab, layers, width, heads, batch, seq;
};

train::TrainConfig config_of(const GptShape& s) {
  return train::TrainConfig::from_json(
      {{"model",
        {{"type", "gpt"},
         {"vocab_size", s.vocab},
         {"context_length", s.seq},
         {"n_layers", s.layers},
         {"n_heads", s.heads},
         {"d_model", s.width}}},
       {"train", {{"batch_size", s.batch}, {"steps", 1}}}});
}

}  // namespace

TEST_CASE("a serial GPT keeps the activations and reaches the peak the planner counts", "[plan]") {
  const GptShape shapes[] = {{256, 2, 128, 4, 8, 64},  {256, 1, 128, 4, 8, 64},
                          {512, 2, 128, 8, 8, 64},  {256, 2, 256, 4, 8, 64},
                          {256, 2, 128, 4, 16, 128}, {1000, 3, 96, 6, 4, 32}};
  for (const GptShape& s : shapes) {
    INFO("vocab " << s.vocab << " layers " << s.layers << " width " << s.width << " heads "
                  << s.heads << " batch " << s.batch << " seq " << s.seq);
    const train::TrainConfig config = config_of(s);
    const plan::Workload w = plan::workload_of(config);
    plan::Layout layout;
    layout.micro_batch_size = s.batch;
    plan::RankPlace place;
    place.blocks = s.layers;
    const plan::MemoryParts predicted = plan::rank_memory(w, layout, place);

    Generator gen(3);
    gpt::GPT model(config.gpt, nn::BuildContext(gen));
    model.train();
    const Tensor ids = zeros({s.batch, s.seq}, {.dtype = DType::i64});
    const int64_t params = int64_t(model.num_parameters()) * 4;
    REQUIRE(params == predicted.parameters);
    reset_peak_memory(kCPU);
    const int64_t before = memory_stats(kCPU).current_bytes;
    Tensor loss = model.loss(ids, ids);
    const int64_t kept = memory_stats(kCPU).current_bytes - before;
    autograd::backward({loss});
    const int64_t peak = memory_stats(kCPU).peak_bytes - before;
    // Forward: what the model keeps for backward (the ids are the caller's, held before).
    CHECK(double(kept) == Approx(double(predicted.activations)).epsilon(0.01));
    // Forward and backward: activations, gradients as they appear and backward's transients;
    // the planner's peak less what this bare loop does not hold (optimizer state, the batch).
    const int64_t step_peak = predicted.total() - predicted.parameters - predicted.optimizer_state -
                              predicted.other;
    CHECK(double(peak) == Approx(double(step_peak)).epsilon(0.01));
  }
}

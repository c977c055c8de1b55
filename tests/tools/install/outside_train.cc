// An outside program, built by the install test with g++ and pkg-config against an installed
// Tessera: trains a tiny GPT for a few steps through the C++ API (models/train under
// run_distributed, so MPI starts as in `tessera train`) and exits non-zero unless the loss falls
// (or, in a CUDA build, unless the self-registering CUDA backend was linked in).
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/allocator.h"
#include "models/train/trainer.h"
#include "tessera.h"

namespace {

double mean(const std::vector<double>& v, size_t begin, size_t end) {
  double s = 0;
  for (size_t i = begin; i < end; ++i) s += v[i];
  return s / double(end - begin);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tessera;
#if defined(TESSERA_CUDA)
  // A CUDA build's backend registers itself from a static constructor, which only an archive
  // linked whole (as tessera.pc links it) brings in. Registering asks nothing of the driver.
  try {
    (void)allocator_for(cuda_device(0));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "expected the CUDA backend to be linked in: %s\n", e.what());
    return 1;
  }
  std::printf("CUDA backend linked in\n");
#endif
  return parallel::run_distributed(
      argc, argv, [](const std::shared_ptr<parallel::Communicator>& world) {
        const auto config = train::TrainConfig::from_json(nlohmann::json::parse(R"({
      "model": {"type": "gpt", "vocab_size": 256, "context_length": 32, "n_layers": 1,
                "n_heads": 2, "d_model": 32},
      "optimizer": {"type": "adamw", "lr": 1e-2},
      "train": {"steps": 30, "batch_size": 8, "threads": 2, "eval_batches": 1, "sample_tokens": 0},
      "data": {"builtin_tokens": 32768, "builtin_val_tokens": 2048},
      "logging": {"progress": false}
    })"));
        const train::TrainSummary summary = train::run_training(config, world);
        const std::vector<double>& losses = summary.losses;
        if (losses.size() != 30) {
          std::fprintf(stderr, "expected 30 steps, got %zu\n", losses.size());
          return 1;
        }
        for (double l : losses) {
          if (!std::isfinite(l)) {
            std::fprintf(stderr, "non-finite loss %g\n", l);
            return 1;
          }
        }
        const double first = mean(losses, 0, 5),
                     last = mean(losses, losses.size() - 5, losses.size());
        std::printf("rank %d of %d: loss %.4f -> %.4f over %zu steps\n", world->rank(),
                    world->size(), first, last, losses.size());
        if (!(last < 0.9 * first)) {
          std::fprintf(stderr, "expected the loss to fall by 10%%, got %.4f -> %.4f\n", first,
                       last);
          return 1;
        }
        return 0;
      });
}

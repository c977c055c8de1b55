// Tensor parallelism and ZeRO on GPUs, one rank per GPU, run by parallel_cuda_test.sh under mpirun
// on 1, 2, 4 and 8 ranks: a tiny GPT (dropout on, gradient clipping on, 4 heads) trains under every
// tensor layout of the ranks and under ZeRO stages 1, 2 and 3 (and offload) over them, on CUDA
// (the groups' collectives over NCCL, through RoutedCommunicator), with the losses of the same
// layout on the CPU (which the CLI tests prove equal to the serial run's) within 1e-3 relative,
// the tolerance of trainer_cuda_test's CPU-against-GPU runs. Rank 0 ends with
// "parallel_cuda: all checks passed", or, without a GPU for each rank,
// "parallel_cuda: SKIPPED: <why>".
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/cuda/runtime.h"
#include "core/error.h"
#include "models/train/trainer.h"
#include "parallel/comm/mpi_runtime.h"
#include "tests/parallel/rank_check.h"

using namespace tessera;
using nlohmann::json;

namespace {

struct Layout {
  std::string name;
  json tensor = {{"size", 1}};  // the parallel.tensor section
  json zero = {{"stage", 0}};   // the zero section
};

// Every tensor layout of `ranks` ranks the CLI tests run on the CPU (the rest of the world, if
// any, data parallel), ZeRO stage 2 over the data group of tp 2, and ZeRO's stages, with and
// without offload, over the whole world as the data group (one rank and one GPU included: the
// host shards and the CPU Adam beside one device).
std::vector<Layout> layouts(int ranks) {
  std::vector<Layout> out;
  if (ranks % 2 == 0) {
    out.push_back({"1d tp 2", {{"size", 2}}});
    out.push_back({"1d tp 2, sequence parallel", {{"size", 2}, {"sequence_parallel", true}}});
  }
  if (ranks % 4 == 0) {
    out.push_back({"2d 2 x 2", {{"size", 4}, {"mode", "2d"}}});
    out.push_back({"zero 2 over tp 2", {{"size", 2}}, {{"stage", 2}}});
  }
  if (ranks % 8 == 0) {
    out.push_back({"2.5d 2 x 2 x depth 2", {{"size", 8}, {"mode", "2.5d"}, {"depth", 2}}});
    out.push_back({"3d 2 x 2 x 2", {{"size", 8}, {"mode", "3d"}}});
  }
  const std::string dp = " over dp " + std::to_string(ranks);
  for (int stage : {1, 2, 3})
    out.push_back({"zero " + std::to_string(stage) + dp, {{"size", 1}}, {{"stage", stage}}});
  out.push_back({"zero 2 + offload" + dp, {{"size", 1}}, {{"stage", 2}, {"offload", true}}});
  out.push_back({"zero 3 + offload + offload_params" + dp,
                 {{"size", 1}},
                 {{"stage", 3}, {"offload", true}, {"offload_params", true}}});
  return out;
}

json tiny_gpt(const Layout& layout, const std::string& device) {
  return {{"model",
           {{"type", "gpt"},
            {"vocab_size", 256},
            {"context_length", 32},
            {"n_layers", 1},
            {"n_heads", 4},
            {"d_model", 32},
            {"dropout", 0.1},
            {"attn_dropout", 0.1}}},
          {"optimizer", {{"type", "adamw"}, {"lr", 1e-2}}},
          {"train",
           {{"steps", 8},
            {"batch_size", 8},
            {"eval_batches", 2},
            {"sample_tokens", 0},
            {"grad_clip", 0.05},
            {"device", device}}},
          {"parallel", {{"tensor", layout.tensor}}},
          {"zero", layout.zero},
          {"data", {{"builtin_tokens", 65536}, {"builtin_val_tokens", 4096}}},
          {"logging", {{"progress", false}}}};
}

}  // namespace

int main(int argc, char** argv) {
  return parallel::run_distributed(
      argc, argv, [](const std::shared_ptr<parallel::Communicator>& world) {
        const int devices = cuda::device_count();
        if (devices < world->size()) {
          if (world->rank() == 0) {
            std::printf(
                "parallel_cuda: SKIPPED: tensor parallelism and ZeRO on CUDA need a GPU per rank: "
                "%d "
                "ranks, %d GPU%s (%s)\n",
                world->size(), devices, devices == 1 ? "" : "s",
                devices == 0 ? cuda::unavailable_reason().c_str()
                             : "NCCL refuses two ranks on one GPU");
          }
          return 0;
        }
        for (const Layout& layout : layouts(world->size())) {
          const train::TrainSummary cpu =
              train::run_training(train::TrainConfig::from_json(tiny_gpt(layout, "cpu")), world);
          const train::TrainSummary gpu =
              train::run_training(train::TrainConfig::from_json(tiny_gpt(layout, "cuda")), world);
          RANK_CHECK(gpu.losses.size() == cpu.losses.size() && !cpu.losses.empty(), layout.name,
                     ": ", gpu.losses.size(), " steps on CUDA, ", cpu.losses.size(), " on the CPU");
          for (size_t i = 0; i < cpu.losses.size(); ++i) {
            RANK_CHECK(std::isfinite(gpu.losses[i]) && std::fabs(gpu.losses[i] - cpu.losses[i]) <=
                                                           1e-3 * std::fabs(cpu.losses[i]),
                       layout.name, ", step ", i + 1, ": CUDA loss ", gpu.losses[i], ", CPU loss ",
                       cpu.losses[i]);
          }
          if (world->rank() == 0)
            std::printf("ok: %s on CUDA follows the CPU over %zu steps\n", layout.name.c_str(),
                        cpu.losses.size());
        }
        world->barrier()->wait();
        if (world->rank() == 0)
          std::printf("parallel_cuda: all checks passed on %d ranks\n", world->size());
        return 0;
      });
}

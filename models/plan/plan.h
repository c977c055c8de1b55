// The planner: for a training config and a world size, predict a layout's step time, throughput,
// MFU and every rank's peak memory (with its parts), search every legal layout for the fastest
// that fits, and write the winner as a config `tessera train` runs unchanged. Pure functions of
// the config, the layout and a cluster profile: no MPI, no allocation of the model.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/plan/cluster.h"
#include "models/train/train_config.h"

namespace tessera::plan {

// What a search varies; the model, the global batch and the sequence stay the config's.
struct Layout {
  parallel::ParallelConfig parallel;
  train::ZeroSection zero;
  int64_t micro_batch_size = 0;  // per rank per forward
  bool checkpoint = false;       // model.checkpoint: whole blocks recomputed in backward
};

// One rank's bytes at its peak, by what holds them.
struct MemoryParts {
  int64_t parameters = 0;      // this rank's parameters (ZeRO-3: its shards and the gathered ones)
  int64_t gradients = 0;       // gradients and gradient buckets
  int64_t master_weights = 0;  // f32 masters of bf16 / f16 parameters (ZeRO: this rank's shard)
  int64_t optimizer_state = 0;
  int64_t activations = 0;     // what the layers save for backward, for every micro-batch in flight
  int64_t comm_buffers = 0;    // pipeline transfers, ring / all-to-all buffers, parameter gathers
  int64_t temporary = 0;       // the largest transient at the peak (logits, their gradient, ...)
  int64_t other = 0;           // the batch's tokens, buffers, positions
  int64_t total() const;
  nlohmann::json to_json() const;
};

struct Prediction {
  Layout layout;
  bool feasible = true;
  std::string why;  // empty when feasible: the refusal (train's own words) or the memory overflow
  double step_seconds = 0;
  double tokens_per_second = 0;  // samples per second for ViT
  double mfu = 0;                // model FLOPs (6 N per token + attention) / (step x peak x ranks)
  int64_t peak_bytes = 0;        // the largest over ranks
  int peak_rank = 0;
  // Every rank of a pipeline stage holds the same (the mesh puts the pipeline outermost): the
  // peak per stage, and world ranks 0 .. ranks_per_stage - 1 are stage 0's.
  std::vector<int64_t> peak_bytes_stages;
  int ranks_per_stage = 1;
  std::vector<int64_t> peak_bytes_ranks() const;  // per world rank
  MemoryParts peak_parts;                 // peak_rank's parts
  int64_t host_bytes = 0;                 // offload's share in host memory, per rank (the largest)
  std::vector<std::pair<std::string, int64_t>> comm_bytes_per_rank;  // group -> bytes sent per step
  double bubble = 0;                      // the pipeline's idle fraction (0 without a pipeline)
  // Where the time goes on the slowest rank: compute, exposed communication, bubble, optimizer.
  std::vector<std::pair<std::string, double>> time_parts;

  // The interface others script against: layout (the `parallel` and `zero` sections as a config
  // holds them, plus train.micro_batch_size and model.checkpoint), feasible, why, step_seconds,
  // tokens_per_second, mfu, peak_bytes, peak_rank, peak_bytes_ranks, comm_bytes_per_rank, bubble,
  // memory (the peak rank's parts), time (its parts).
  nlohmann::json to_json() const;
};

// The config's own layout on `world` ranks (parallel.data filled from the world as training does).
Prediction predict(const train::TrainConfig& config, int world, const ClusterProfile& cluster);
// A given layout of the config's model, batch and sequence.
Prediction predict_layout(const train::TrainConfig& config, const Layout& layout, int world,
                          const ClusterProfile& cluster);

struct SearchOptions {
  bool include_infeasible = true;  // list refused layouts (after the feasible ones) with why
};
// Every layout of `world` ranks, feasible ones first by predicted step time.
std::vector<Prediction> search(const train::TrainConfig& config, int world,
                               const ClusterProfile& cluster, const SearchOptions& options = {});

// The config with `layout` in place, as the trainer reads it (parallel.data given).
train::TrainConfig with_layout(const train::TrainConfig& config, const Layout& layout);

// The layout as integers and back: how rank 0's choice under "parallel": "auto" reaches every
// rank in one broadcast. layout_from_code keeps `base`'s other ZeRO options. Throws ValueError on
// a code of the wrong length or with an unknown enum value.
std::vector<int64_t> layout_code(const Layout& layout);
Layout layout_from_code(const std::vector<int64_t>& code, const train::ZeroSection& base);

// The config with `layout` in place, as JSON that `tessera train` reads (config.source edited:
// parallel, zero, train.micro_batch_size, model.checkpoint).
nlohmann::json layout_config(const train::TrainConfig& config, const Layout& layout);

}  // namespace tessera::plan

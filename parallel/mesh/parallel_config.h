// The `parallel` section of the configuration: how many ways the job splits along data,
// pipeline, sequence and tensor parallelism, and which tensor-parallel mode it uses.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "parallel/mesh/tensor_mode.h"
#include "parallel/pipeline/partition.h"
#include "parallel/pipeline/schedule.h"
#include "parallel/sequence/modes.h"

namespace tessera::parallel {

struct TensorParallelConfig {
  int size = 1;
  TensorMode mode = TensorMode::one_d;  // read from "1d", "2d", "2.5d" or "3d"
  int depth = 1;                        // 2.5D only: the number of stacked q x q layers
  // 1D only (Megatron's sequence parallelism): LayerNorm, dropout and the residual stream hold
  // sequence shards (B, T / size, C) between the tensor-parallel regions.
  bool sequence_parallel = false;
};

// The `parallel.pipeline` object's keys besides its size (see parallel/pipeline/schedule.h and
// partition.h, which interpret them).
struct PipelineOptions {
  pipeline::ScheduleKind schedule = pipeline::ScheduleKind::one_f_one_b;  // "1f1b"
  int virtual_stages = 1;  // model chunks per rank (interleaved only)
  // "uniform", "parameters" or a list of block counts per stage.
  pipeline::PartitionSpec partition;
};

struct ParallelConfig {
  int data = 1;
  int pipeline = 1;  // stages
  PipelineOptions pipeline_options;
  int sequence = 1;  // ranks the sequence itself is split over (parallel/sequence)
  // How attention runs over the split sequence: "ring", "all_to_all" or "ring_flash".
  sequence::SequenceAttentionMode sequence_mode = sequence::SequenceAttentionMode::ring_flash;
  // How positions lie on the sequence ranks: "contiguous" (rank r holds [r T/S, (r + 1) T/S)) or
  // "zigzag" (2S chunks, rank r holds chunks r and 2S - 1 - r: under a causal mask every rank
  // scores the same number of pairs). Unset ("auto"): contiguous here; the trainer picks zigzag
  // for a causal model under ring_flash.
  std::optional<sequence::SequenceLayout> sequence_layout;
  // The layout the ranks use: sequence_layout, contiguous when unset.
  sequence::SequenceLayout layout() const {
    return sequence_layout.value_or(sequence::SequenceLayout::contiguous);
  }
  TensorParallelConfig tensor;

  // pipeline * data * sequence * tensor.size: the world size this layout needs.
  int world_size() const;
  // Throws a ValueError unless the layout is possible: every size >= 1, 2D size a
  // square, 2.5D size q * q * depth, 3D size a cube, sequence_parallel only in 1D with size > 1,
  // virtual stages > 1 only for the interleaved schedule. (Schedules, sequence modes and layouts
  // and partitions are enums, checked where the JSON is read.)
  void validate() const;
  // validate(), and the world size must equal world_size().
  void validate(int world_size) const;

  // {"data": 2, "pipeline": 1, "sequence": 1,   (or "pipeline": {"size": 4, "schedule": "1f1b",
  //                                                 "virtual_stages": 1, "partition": "uniform"},
  //                                                 "sequence": {"size": 2, "mode": "ring"})
  //  "tensor": {"size": 4, "mode": "1d", "depth": 1, "sequence_parallel": true}};
  // absent keys keep their defaults, unknown keys and wrong types are errors naming the key.
  static ParallelConfig from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;
};

// The side q of the tensor-parallel grid: sqrt(size) for 2D, sqrt(size / depth) for 2.5D,
// cbrt(size) for 3D, size for 1D. Assumes a validated config.
int tensor_grid_dim(const TensorParallelConfig& tensor);

}  // namespace tessera::parallel

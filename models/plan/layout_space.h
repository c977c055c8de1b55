// The layouts a search walks, their JSON form, and whether a prediction fits the devices.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/plan/cluster.h"
#include "models/plan/plan.h"

namespace tessera::plan {

// Every layout of `world` ranks for the config's model, global batch and sequence: tensor size
// and mode (1D with and without Megatron's sequence parallelism, 2D, 2.5D, 3D), pipeline size,
// schedule and virtual stages, sequence size and mode, the data size that fills the world, ZeRO
// stage 0-3 (1-3 only with data > 1) with and without offload, every micro-batch size that
// divides the data rank's share of the batch, activation checkpointing on and off. Layouts that
// cannot divide the world are never made; the rest are refused (or not) by predict_layout.
std::vector<Layout> candidate_layouts(const train::TrainConfig& config, int world);

// {"parallel": {...}, "zero": {"stage": S, "offload": B}, "micro_batch_size": M,
//  "checkpoint": C}: the sections a config holds.
nlohmann::json layout_json(const Layout& layout);

// "" when every rank's peak fits its device (the host: the ranks of a node share its memory),
// else which rank overflows and by how much. Peaks per pipeline stage, ranks_per_stage each (world
// rank r is stage r / ranks_per_stage's).
std::string memory_misfit(const std::vector<int64_t>& peak_bytes_stages, int ranks_per_stage,
                          const ClusterProfile& cluster);

}  // namespace tessera::plan

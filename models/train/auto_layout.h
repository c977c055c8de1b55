// "parallel": "auto" (train_config.h): rank 0 asks the planner (models/plan) for the fastest
// layout of this world that fits the cluster ($TESSERA_CLUSTER: a bundled name or a profile file;
// else "host", this machine), every rank takes it from one broadcast, and the run prints the
// prediction in its header and beside what it measured at the end.
#pragma once

#include <string>
#include <vector>

#include "models/plan/plan.h"
#include "models/train/train_config.h"
#include "parallel/comm/communicator.h"

namespace tessera::train {

struct AutoLayout {
  plan::Prediction prediction;  // rank 0's (other ranks: the layout only)
  std::string cluster;          // the profile's name
};

// Collective over `world` (null: one process). Puts the chosen layout into `config` (parallel,
// zero stage and offload, micro-batch, checkpointing) and clears parallel_auto. Throws ValueError
// on every rank (agreed) when no layout fits or the cluster is unknown.
AutoLayout choose_auto_layout(TrainConfig& config, parallel::Communicator* world);

// "layout (auto, cluster host): dp2 tp1 pp1 zero0 mb8: predicted 0.0301 s per step, peak 16.9
// MiB on rank 0".
std::string describe_auto_layout(const AutoLayout& chosen);
// The prediction beside what the run measured: the median step time and the largest peak.
std::string compare_auto_layout(const AutoLayout& chosen, double measured_step_seconds,
                                int64_t measured_peak_bytes, int measured_peak_rank);

}  // namespace tessera::train

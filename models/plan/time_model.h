// Step time under a layout: compute from each layer's FLOPs and bytes at the cluster profile's
// efficiency for that shape, communication from the layout's collective list at the profile's
// latency and bandwidth for each group's size and placement (inside a node or across nodes, from
// the mesh order: tensor innermost, then sequence, data, pipeline), the pipeline from the schedule
// simulator fed with the stages' forward and backward costs, and data-parallel / ZeRO reductions
// overlapped with backward as Tessera overlaps them.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "models/plan/cluster.h"
#include "models/plan/plan.h"
#include "models/plan/workload.h"

namespace tessera::plan {

struct StepTime {
  double seconds = 0;
  double bubble = 0;
  std::vector<std::pair<std::string, double>> parts;            // where the time goes
  std::vector<std::pair<std::string, int64_t>> bytes_per_rank;  // group -> bytes sent per step
};

// micro_batches: per step on each data rank; blocks_per_stage: the largest stage's blocks.
StepTime step_time(const Workload& w, const Layout& layout, int micro_batches,
                   int64_t blocks_per_stage, int64_t local_parameters,
                   const ClusterProfile& cluster, int world);

}  // namespace tessera::plan

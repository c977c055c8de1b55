// Which copy of a serial parameter this rank holds, and whether it is the one that counts: the
// copy a global gradient norm adds and a checkpoint writes. One rule for both readers.
//
// A parameter's placement (Module::named_placements) records its tensor split and the groups a
// shard repeats over (2.5D's depth layers). Two more repetitions depend on the layout around the
// model, and are added here:
//   a parameter replicated over the tensor group   {"tensor", size, tensor rank}
//   a weight tied between the pipeline's ends      {"embedding", 2, embedding rank} (first stage
//                                                  counts)
// so Placement::counted_copy(), index 0 in every replica group, is the whole rule. Data-parallel
// (and sequence) replicas are the reducer's business and are not counted here.
#pragma once

#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "parallel/mesh/parallel_context.h"
#include "parallel/tensor/placement.h"

namespace tessera::train {

class ParamCopies {
 public:
  // context: null for one process; tied: the tied parameters this rank holds (pipeline ends).
  ParamCopies(const parallel::ParallelContext* context, const std::vector<std::string>& tied);

  // `p`, the placement of the parameter (or of state shaped like it) named `param`, completed
  // with the groups this rank's copy repeats over.
  parallel::tensor::Placement on_this_rank(parallel::tensor::Placement p,
                                           const std::string& param) const;
  bool counted(const parallel::tensor::Placement& p, const std::string& param) const {
    return on_this_rank(p, param).counted_copy();
  }
  // counted() of each named placement, in order.
  std::vector<bool> counted(
      const std::vector<std::pair<std::string, parallel::tensor::Placement>>& placements) const;

 private:
  parallel::tensor::ShardReplica tensor_copy_;     // parts 1: no tensor parallelism
  parallel::tensor::ShardReplica embedding_copy_;  // parts 1: no tied weights here
  std::unordered_set<std::string> tied_;
};

}  // namespace tessera::train

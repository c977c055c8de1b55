// Where stage 3's chunks live between uses (param_placement.h's policies), behind one interface
// over the chunk store (chunk_store.h), as Gemini's PlacementPolicy beside its ChunkManager:
//   device  nothing to decide: one chunk per group, on the device.
//   static  a fixed share of the chunks on the host, chosen at construction.
//   auto    a warm-up step with every chunk on the host traces the device's other use; then device
//           copies as the limit allows, within each step by the warm-up's trace (ChunkSchedule).
#pragma once

#include <cstdint>
#include <memory>

#include "parallel/comm/communicator.h"
#include "parallel/zero/access_order.h"
#include "parallel/zero/chunk_store.h"
#include "parallel/zero/param_placement.h"

namespace tessera::parallel::zero {

class ChunkPlacement {
 public:
  virtual ~ChunkPlacement() = default;
  // Before a parameter's gather, and once the access order has placed it at record position
  // `position` (AccessOrder::kOffRecord when it is not on the record).
  virtual void before_gather() {}
  virtual void at_gather(size_t position) { (void)position; }
  // A window ended with every parameter released; `training`: it held a step's forward and
  // backward, whose gathers `order` records. Collective for auto's first training window.
  virtual void window_ended(bool training, const AccessOrder& order) {
    (void)training, (void)order;
  }
  // auto: drops every device copy (the homes hold the same values).
  virtual void evict_copies() {}
  // False while auto's warm-up runs.
  virtual bool placed() const { return true; }
  // auto: the device's peak in the warm-up step (0 before it ends, and under the other policies).
  virtual int64_t warmup_peak_bytes() const { return 0; }
};

// What the auto policy needs beside the store: the group that agrees its decision, the number of
// parameters, and the most bytes prefetching may hold ahead of use (`prefetch` parameters of at
// most `largest_param_bytes`).
struct AutoPlacementContext {
  std::shared_ptr<Communicator> comm;
  size_t params = 0;
  int64_t largest_param_bytes = 0;
  int prefetch = 0;
};

// The policy of `placement` over `store` (which it must not outlive); places the chunks it starts
// with. Throws ValueError for an auto placement without a positive device limit.
std::unique_ptr<ChunkPlacement> make_chunk_placement(const ParamPlacement& placement,
                                                     ChunkStore& store,
                                                     const AutoPlacementContext& context);

}  // namespace tessera::parallel::zero

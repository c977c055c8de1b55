// The device and static chunk placements, and the factory over every policy (chunk_placement.h;
// auto's lives in auto_placement.cc).
#include "parallel/zero/chunk_placement.h"

#include <vector>

#include "core/error.h"

namespace tessera::parallel::zero {

std::unique_ptr<ChunkPlacement> make_auto_placement(const ParamPlacement& placement,
                                                    ChunkStore& store,
                                                    const AutoPlacementContext& context);

namespace {

// Nothing moves: the compute shards stay where they are (on the device).
class DevicePlacement : public ChunkPlacement {};

// The last host_fraction of the chunks (in model order) live on the host, for the whole run.
class StaticPlacement : public ChunkPlacement {
 public:
  StaticPlacement(const ParamPlacement& placement, ChunkStore& store) {
    store.place(static_host_chunks(store.count(), placement.host_fraction));
  }
};

}  // namespace

std::unique_ptr<ChunkPlacement> make_chunk_placement(const ParamPlacement& placement,
                                                     ChunkStore& store,
                                                     const AutoPlacementContext& context) {
  switch (placement.policy) {
    case PlacementPolicy::device:
      return std::make_unique<DevicePlacement>();
    case PlacementPolicy::static_share:
      return std::make_unique<StaticPlacement>(placement, store);
    case PlacementPolicy::auto_traced:
      return make_auto_placement(placement, store, context);
  }
  TS_FAIL("zero", "unknown parameter placement ", int(placement.policy));
}

}  // namespace tessera::parallel::zero

// Balanced contiguous sharding of a global batch over data-parallel ranks.
#include "parallel/data/shard.h"

#include "core/error.h"

namespace tessera::parallel {

ShardRange shard_range(int64_t global_batch, int rank, int world) {
  TS_CHECK(world > 0, "shard_range", "expected a positive world size, got ", world);
  TS_CHECK(rank >= 0 && rank < world, "shard_range", "expected a rank in [0, ", world, "), got ",
           rank);
  TS_CHECK(global_batch >= 0, "shard_range", "expected a non-negative global batch, got ",
           global_batch);
  const int64_t base = global_batch / world;
  const int64_t extra = global_batch % world;
  // Ranks below `extra` hold base + 1 items; the rest hold base.
  const int64_t begin = rank * base + (rank < extra ? rank : extra);
  return ShardRange{begin, begin + base + (rank < extra ? 1 : 0)};
}

}  // namespace tessera::parallel

// Which part of a global batch (or of any list of items) each data-parallel rank reads.
#pragma once

#include <cstdint>

namespace tessera::parallel {

// Items [begin, end) of the global batch.
struct ShardRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

// Rank `rank`'s contiguous slice when `global_batch` items are split over `world` ranks: the
// slices tile [0, global_batch) in rank order and their sizes differ by at most one (the first
// global_batch % world ranks get the extra item). Averaging per-rank mean losses equals the global
// mean only when every slice has the same size, so trainers check global_batch % world == 0.
ShardRange shard_range(int64_t global_batch, int rank, int world);

}  // namespace tessera::parallel

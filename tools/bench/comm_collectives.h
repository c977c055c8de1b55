// The collectives half of `bench comm`: each of Tessera's collectives beside the plain MPI call of
// the same kind, size and dtype, from the same binary in the same run, and their ratio.
#pragma once

#include <cstdint>
#include <string>

#include "parallel/comm/communicator.h"

namespace tessera::bench {

struct CollectiveBenchOptions {
  int64_t min_bytes = 1024;
  int64_t max_bytes = int64_t(256) << 20;  // sizes grow 4x from min_bytes up to this
  int rounds = 7;                          // timed batches per side; the median is reported
};

// "64 KB", "256 MB" for whole units (the usual sizes); "1020 B", "3.99 KB" otherwise.
std::string human_bytes(int64_t bytes);

// Collective over `world` (every rank of the job, a communicator of the MPI backend); rank 0
// prints the table.
void bench_collectives(parallel::Communicator& world, const CollectiveBenchOptions& options);

}  // namespace tessera::bench

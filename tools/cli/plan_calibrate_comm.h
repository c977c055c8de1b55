// `tessera plan calibrate`'s collectives half: every collective timed on groups of 2..N ranks of
// the world at a few payloads, each fitted to the ring model (plan::fit_link). Also the quiet wait
// that keeps idle ranks off the cores while others measure.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "models/plan/cluster.h"
#include "parallel/comm/communicator.h"

namespace tessera::cli {

struct CommOptions {
  std::vector<int64_t> payloads;           // bytes per call, as collective_seconds counts them
  int rounds = 5;                          // timed batches per payload; the median
  int64_t batch_bytes = int64_t(8) << 20;  // a batch holds about this much traffic (1-200 calls)
};

// Collective over `world`. Group size p uses world ranks [0, p); the others wait quietly. World
// rank 0 returns the fits (collective -> group size -> link); the other ranks an empty map.
// send_recv is timed at p = 2 only (it is always a pair).
std::map<plan::Collective, std::map<int, plan::LinkCost>> measure_collectives(
    const std::shared_ptr<parallel::Communicator>& world, const CommOptions& options);

// Collective over `world`: for p = 2 .. N active ranks (world ranks [0, p); the others wait
// quietly), the seconds a small all-reduce waits beyond its idle cost when every active rank
// computes a burst between calls, as training does: the time of burst + call, less the burst's
// with every active rank computing, less the call's alone. This is what ranks sharing a node's
// cores lose to one another's scheduling. World rank 0 returns them (p -> seconds).
std::map<int, double> measure_loaded_waits(const std::shared_ptr<parallel::Communicator>& world,
                                           bool quick);

// Point to point over `world`: `waiting` ranks sleep until `from` releases them. Unlike a barrier
// (a blocking MPI call that spins) the waiters poll a receive with short sleeps, so the cores stay
// with the ranks that measure.
void wait_quietly(parallel::Communicator& world, int from);
void release_waiting(parallel::Communicator& world, const std::vector<int>& waiting);

}  // namespace tessera::cli

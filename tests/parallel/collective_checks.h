// The checks the multi-rank test program runs; each throws on the first wrong value.
#pragma once

#include <memory>

#include "parallel/comm/communicator.h"

namespace tessera::parallel::testing {

// Every collective, dtype and reduce op on odd sizes against a serial reference.
void run_collective_checks(Communicator& comm);
// Point to point and tags, batched transfers, overlapping works, split groups, byte counters,
// argument errors and the configuration check.
void run_feature_checks(Communicator& world);
// RoutedCommunicator over `world` with no device half: the collectives through it, its counters,
// split and the pairs it refuses.
void run_routed_checks(const std::shared_ptr<Communicator>& world);

}  // namespace tessera::parallel::testing

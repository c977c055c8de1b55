// Sums of doubles over a group that every rank gets bit for bit: the values travel as their bits
// and are added in rank order, which a floating-point all-reduce does not promise (its order
// depends on the algorithm and the message size). For the numbers ranks decide on together: the
// loss, gradient norms, metrics.
#pragma once

#include <vector>

#include "parallel/comm/communicator.h"

namespace tessera::parallel {

// Each value summed over the ranks of `comm` (nullptr or one rank: the values themselves).
std::vector<double> sum_over_ranks(Communicator* comm, const std::vector<double>& values);

}  // namespace tessera::parallel

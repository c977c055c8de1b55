// Times one GPT-2 bench case on Tessera's CPU backend.
#pragma once

#include "tools/bench/cases.h"
#include "tools/bench/timer.h"

namespace tessera::bench {

// Builds the case's inputs once, then returns the median seconds per call. Forward ops run
// through the public op API (autograd/ops.h, grad mode off), as a model calls them; backward ops
// call the kernel API directly, as the ops' backward nodes do. Outputs are allocated inside the
// timed call, like PyTorch eager does. Throws tessera::Error when the op fails or is unknown.
double time_tessera(const BenchCase& c, const TimingOptions& timing);

}  // namespace tessera::bench

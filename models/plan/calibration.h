// The arithmetic of `tessera plan calibrate`, apart from its measurements: fitting a collective's
// ring-model link to timed payloads, and turning timed GEMMs into an efficiency curve.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "models/plan/cluster.h"

namespace tessera::plan {

// One timed call: its payload (as collective_seconds counts it) and its seconds.
struct TimedPayload {
  int64_t bytes = 0;
  double seconds = 0;
};

// The LinkCost whose ring model (ClusterProfile::collective_seconds) best fits the samples of `c`
// on `ranks` ranks: a line t = a + b x bytes by least squares of the relative residuals, then
// latency = a / steps and bandwidth = volume / b. A negative intercept (noise) becomes 0; a slope
// <= 0 (a flat or falling series) falls back to the largest payload's mean speed. Throws without
// two distinct payloads or on p < 2.
LinkCost fit_link(Collective c, int ranks, const std::vector<TimedPayload>& samples);

// One timed GEMM: its FLOPs and achieved / peak.
struct GemmSample {
  double flops = 0;
  double efficiency = 0;
};

// The gemm_efficiency curve: samples sorted by FLOPs and binned from the smallest up, a bin
// holding the samples below twice its first one's FLOPs; each bin is one point at the geometric
// mean of its FLOPs with the mean of its efficiencies. A curve by FLOPs cannot tell shapes apart
// (a (T, 4C) x (4C, C) product runs slower than a (T, C) x (C, 4C) one of the same FLOPs), so the
// bins average them. Efficiencies are kept in (0, 1] (a turbo clock can beat the measured peak).
std::vector<std::pair<double, double>> gemm_curve(std::vector<GemmSample> samples);

}  // namespace tessera::plan

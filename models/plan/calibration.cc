// Fits for `tessera plan calibrate` (calibration.h).
#include "models/plan/calibration.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.h"

namespace tessera::plan {

LinkCost fit_link(Collective c, int ranks, const std::vector<TimedPayload>& samples) {
  const RingShape shape = ring_shape(c, ranks);
  TS_CHECK(shape.steps > 0, "calibrate", "expected a group of at least 2 ranks to fit ",
           collective_name(c), ", got ", ranks);
  std::set<int64_t> sizes;
  for (const TimedPayload& s : samples) sizes.insert(s.bytes);
  TS_CHECK(sizes.size() >= 2, "calibrate", "expected timings at two payload sizes or more to fit ",
           collective_name(c), ", got ", sizes.size());
  // Weighted least squares with weights 1 / t^2, i.e. relative residuals: the small payloads
  // set the latency and the large ones the bandwidth (plain least squares would let the largest
  // payload's noise swamp the intercept).
  double sw = 0, swx = 0, swy = 0, swxx = 0, swxy = 0;
  for (const TimedPayload& s : samples) {
    TS_CHECK(s.seconds > 0, "calibrate", "expected positive timings to fit ", collective_name(c),
             ", got ", s.seconds, " s at ", s.bytes, " bytes");
    const double w = 1.0 / (s.seconds * s.seconds), x = double(s.bytes);
    sw += w, swx += w * x, swy += w * s.seconds, swxx += w * x * x, swxy += w * x * s.seconds;
  }
  double slope = (sw * swxy - swx * swy) / (sw * swxx - swx * swx);
  double intercept = (swy - slope * swx) / sw;
  const auto largest = std::max_element(
      samples.begin(), samples.end(),
      [](const TimedPayload& a, const TimedPayload& b) { return a.bytes < b.bytes; });
  if (slope <= 0) {
    slope = largest->seconds / double(largest->bytes);
    intercept = 0;
  }
  intercept = std::max(0.0, intercept);
  return {intercept / shape.steps, shape.volume / slope};
}

std::vector<std::pair<double, double>> gemm_curve(std::vector<GemmSample> samples) {
  for (const GemmSample& s : samples) {
    TS_CHECK(s.flops > 0 && s.efficiency > 0, "calibrate",
             "expected GEMM samples with positive FLOPs and efficiency, got ", s.flops, " and ",
             s.efficiency);
  }
  std::sort(samples.begin(), samples.end(),
            [](const GemmSample& a, const GemmSample& b) { return a.flops < b.flops; });
  std::vector<std::pair<double, double>> curve;
  size_t i = 0;
  while (i < samples.size()) {
    // One bin: this sample and every later one below twice its FLOPs.
    double log_flops = 0, eff = 0;
    size_t j = i;
    for (; j < samples.size() && samples[j].flops < 2 * samples[i].flops; ++j) {
      log_flops += std::log(samples[j].flops);
      eff += samples[j].efficiency;
    }
    const double n = double(j - i);
    curve.emplace_back(std::exp(log_flops / n), std::min(1.0, eff / n));
    i = j;
  }
  return curve;
}

}  // namespace tessera::plan

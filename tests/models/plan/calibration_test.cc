// The arithmetic of `tessera plan calibrate`: ring-model fits of timed collectives and the GEMM
// efficiency curve built from timed products.
#include "models/plan/calibration.h"

#include <catch2/catch.hpp>
#include <cmath>

#include "core/error.h"

using namespace tessera;
using namespace tessera::plan;
using Catch::Matchers::Contains;

namespace {

// Exact ring-model times for `link`, as collective_seconds computes them.
std::vector<TimedPayload> ring_times(Collective c, int ranks, const LinkCost& link,
                                     const std::vector<int64_t>& payloads) {
  ClusterProfile p;
  p.intra_node = link;
  std::vector<TimedPayload> out;
  for (int64_t b : payloads) out.push_back({b, p.collective_seconds(c, b, ranks, false)});
  return out;
}

}  // namespace

TEST_CASE("fit_link recovers the latency and bandwidth of exact ring times", "[plan][calibrate]") {
  const std::vector<int64_t> payloads{4 << 10, 256 << 10, 4 << 20};
  for (Collective c : kCollectives) {
    for (int ranks : {2, 3, 8}) {
      INFO(collective_name(c) << " on " << ranks);
      const LinkCost truth{2.5e-6, 3e9};
      const LinkCost fit = fit_link(c, ranks, ring_times(c, ranks, truth, payloads));
      CHECK(fit.latency_s == Approx(truth.latency_s).epsilon(1e-6));
      CHECK(fit.bandwidth == Approx(truth.bandwidth).epsilon(1e-6));
    }
  }
}

TEST_CASE("fit_link keeps noisy series physical", "[plan][calibrate]") {
  // A line through these points has a negative intercept: no latency, the slope kept.
  const std::vector<TimedPayload> below{{1000, 1e-7}, {2000, 3e-6}, {4000, 9e-6}};
  const LinkCost a = fit_link(Collective::all_gather, 2, below);
  CHECK(a.latency_s == 0.0);
  CHECK(a.bandwidth > 0);
  // Larger payloads no slower: the largest payload's mean speed, no latency.
  const std::vector<TimedPayload> flat{{1000, 5e-6}, {100000, 4e-6}};
  const LinkCost b = fit_link(Collective::all_reduce, 2, flat);
  CHECK(b.latency_s == 0.0);
  CHECK(b.bandwidth == Approx(1.0 * 100000 / 4e-6));  // all_reduce on 2 moves 1x the payload

  CHECK_THROWS_WITH(fit_link(Collective::all_reduce, 1, flat), Contains("at least 2 ranks"));
  CHECK_THROWS_WITH(fit_link(Collective::all_reduce, 2, {{1000, 1e-6}, {1000, 2e-6}}),
                    Contains("two payload sizes"));
  CHECK_THROWS_WITH(fit_link(Collective::all_reduce, 2, {{1000, 0}, {2000, 2e-6}}),
                    Contains("positive timings"));
}

TEST_CASE("gemm_curve sorts, bins by factors of two in FLOPs and caps at 1", "[plan][calibrate]") {
  const auto curve =
      gemm_curve({{1e8, 1.2}, {1.5e6, 0.4}, {1e6, 0.2}, {3e7, 0.5}, {1.9e6, 0.6}, {2.1e6, 0.9}});
  REQUIRE(curve.size() == 4);
  CHECK(curve[0].first == Approx(std::cbrt(1e6 * 1.5e6 * 1.9e6)));  // 1e6, 1.5e6, 1.9e6
  CHECK(curve[0].second == Approx(0.4));
  CHECK(curve[1].first == Approx(2.1e6));  // past twice 1e6: a bin of its own
  CHECK(curve[1].second == Approx(0.9));
  CHECK(curve[2].first == Approx(3e7));
  CHECK(curve[2].second == Approx(0.5));
  CHECK(curve[3].first == Approx(1e8));
  CHECK(curve[3].second == 1.0);
  // The result is a valid profile curve: strictly increasing FLOPs.
  ClusterProfile p;
  p.gemm_efficiency = curve;
  CHECK(p.gemm_efficiency_at(3e7) == Approx(0.5));
  CHECK_THROWS_WITH(gemm_curve({{0, 0.5}}), Contains("positive FLOPs"));
}

// The profile's cost functions: peak FLOP/s, the GEMM efficiency curve, ring collectives and the
// host's core sharing.
#include "models/plan/cluster.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "core/error.h"

namespace tessera::plan {

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::all_reduce:
      return "all_reduce";
    case Collective::reduce_scatter:
      return "reduce_scatter";
    case Collective::all_gather:
      return "all_gather";
    case Collective::broadcast:
      return "broadcast";
    case Collective::reduce:
      return "reduce";
    case Collective::all_to_all:
      return "all_to_all";
    case Collective::send_recv:
      return "send_recv";
  }
  return "?";
}

Collective collective_from_name(const std::string& name) {
  std::string names;
  for (Collective c : kCollectives) {
    if (name == collective_name(c)) return c;
    names += str_cat(names.empty() ? "" : ", ", collective_name(c));
  }
  TS_FAIL("cluster", "expected a collective (", names, "), got '", name, "'");
}

RingShape ring_shape(Collective c, int ranks) {
  if (ranks <= 1) return {};
  const double p = ranks;
  switch (c) {
    case Collective::all_reduce:
      return {2 * (ranks - 1), 2 * (p - 1) / p};
    case Collective::reduce_scatter:
    case Collective::all_gather:
    case Collective::all_to_all:
      return {ranks - 1, (p - 1) / p};
    case Collective::broadcast:
    case Collective::reduce: {
      int steps = 0;  // ceil(log2 p): a binomial tree, the payload pipelined down it once
      while ((1 << steps) < ranks) ++steps;
      return {steps, 1.0};
    }
    case Collective::send_recv:
      return {1, 1.0};
  }
  return {};
}

double ClusterProfile::peak(DType dtype) const {
  const auto it = peak_flops.find(dtype);
  if (it != peak_flops.end()) return it->second;
  std::string have;
  for (const auto& [d, flops] : peak_flops)
    have += str_cat(have.empty() ? "" : ", ", dtype_name(d));
  TS_FAIL("cluster", "expected a peak FLOP/s for ", dtype_name(dtype), " in cluster '", name,
          "', got peaks for ", have.empty() ? "no dtype" : have);
}

double ClusterProfile::gemm_efficiency_at(double flops) const {
  TS_CHECK(!gemm_efficiency.empty(), "cluster", "expected gemm_efficiency points in cluster '",
           name, "', got none");
  const auto& first = gemm_efficiency.front();
  // Below the smallest measured GEMM the time stops shrinking with the work (launch and tile
  // overheads dominate), so efficiency falls in proportion to the FLOPs.
  if (flops <= first.first) return first.second * std::max(0.0, flops) / first.first;
  if (flops >= gemm_efficiency.back().first) return gemm_efficiency.back().second;
  const auto hi = std::upper_bound(gemm_efficiency.begin(), gemm_efficiency.end(), flops,
                                   [](double f, const auto& point) { return f < point.first; });
  const auto lo = std::prev(hi);
  const double t = std::log(flops / lo->first) / std::log(hi->first / lo->first);
  return lo->second + t * (hi->second - lo->second);
}

LinkCost ClusterProfile::intra_node_cost(Collective c, int ranks) const {
  const auto found = measured.find(c);
  if (found == measured.end() || found->second.empty()) return intra_node;
  const std::map<int, LinkCost>& sizes = found->second;
  const auto hi = sizes.lower_bound(ranks);
  if (hi != sizes.end() && hi->first == ranks) return hi->second;
  // Outside the measured sizes hold the nearest one: latency per step and bus bandwidth are the
  // ring model's per-step and per-rank quantities, already scaled by the group size through the
  // step count and volume, so holding them constant is the model's own extrapolation.
  if (hi == sizes.begin()) return hi->second;
  if (hi == sizes.end()) return std::prev(hi)->second;
  // Between two measured sizes: linear in the group size, for latency and bandwidth alike.
  const auto lo = std::prev(hi);
  const double t = double(ranks - lo->first) / double(hi->first - lo->first);
  return {lo->second.latency_s + t * (hi->second.latency_s - lo->second.latency_s),
          lo->second.bandwidth + t * (hi->second.bandwidth - lo->second.bandwidth)};
}

double ClusterProfile::collective_seconds(Collective c, int64_t bytes, int ranks,
                                          bool crosses_nodes, int ranks_per_node) const {
  const RingShape shape = ring_shape(c, ranks);
  if (shape.steps == 0) return 0.0;
  LinkCost link = intra_node_cost(c, ranks);
  if (crosses_nodes) {
    const int nics = std::max(1, ranks_per_node);
    link = {inter_node.latency_s, std::min(nics * inter_node.bandwidth,
                                           intra_node.bandwidth > 0 ? intra_node.bandwidth
                                                                    : nics * inter_node.bandwidth)};
  }
  TS_CHECK(link.bandwidth > 0, "cluster", "expected a positive ",
           crosses_nodes ? "inter_node" : "intra_node", " bandwidth in cluster '", name, "' for a ",
           collective_name(c), " on ", ranks, " ranks, got ", link.bandwidth);
  return shape.steps * link.latency_s + shape.volume * double(bytes) / link.bandwidth;
}

double ClusterProfile::sharing_slowdown(int ranks_on_node) const {
  if (cores <= 0) return 1.0;
  return std::max(1.0, double(ranks_on_node) / double(cores));
}

double ClusterProfile::compute_share(int ranks_on_node) const {
  if (cores <= 0) return 1.0;
  const int ranks = std::max(1, ranks_on_node);
  const int threads = std::max(1, cores / ranks);  // integer division, as set_threads does
  return double(threads) / double(cores) / sharing_slowdown(ranks);
}

double ClusterProfile::loaded_wait(int ranks) const {
  if (loaded_wait_s.empty() || ranks < 2) return 0.0;
  const auto above = loaded_wait_s.lower_bound(ranks);
  if (above == loaded_wait_s.end()) return loaded_wait_s.rbegin()->second;
  if (above->first == ranks || above == loaded_wait_s.begin()) return above->second;
  const auto below = std::prev(above);
  const double f = double(ranks - below->first) / double(above->first - below->first);
  return below->second + f * (above->second - below->second);
}

}  // namespace tessera::plan

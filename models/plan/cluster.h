// A cluster profile: what the planner knows of the machines a run lands on. Devices per node and
// their memory, peak FLOP/s per dtype, memory bandwidth, efficiency curves (GEMM by size,
// attention, element-wise), the links a collective crosses (inside a node, across nodes) and,
// for the host, the cores its ranks share. Profiles are JSON files (models/plan/profiles): the
// bundled ones name the source of every number beside it; `tessera plan calibrate` measures the
// host's (cluster "host").
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace tessera::plan {

// What a collective costs on a group: latency seconds per algorithm step and bytes/s each rank
// moves (a ring all-reduce of S bytes on p ranks: 2 (p - 1) steps, 2 (p - 1) / p S bytes).
struct LinkCost {
  double latency_s = 0;
  double bandwidth = 0;  // bytes per second per rank, each way
};

enum class Collective { all_reduce, reduce_scatter, all_gather, broadcast, reduce, all_to_all, send_recv };
const char* collective_name(Collective c);

struct ClusterProfile {
  std::string name;  // "host", "dgx-a100-80g", ... or the file's stem
  std::string description;
  int devices_per_node = 1;  // ranks a node holds (the host: ranks per machine; see cores)
  int nodes = 1;             // set by load_cluster from --nodes or the world size
  int64_t device_memory = 0;  // bytes per device (the host: RAM shared by its ranks)
  // Peak FLOP/s of one device per compute dtype (f32, bf16, f16): dense, no sparsity.
  std::map<DType, double> peak_flops;
  double memory_bandwidth = 0;  // bytes/s of one device's memory
  // GEMM efficiency (achieved / peak) by a GEMM's FLOPs (2 m n k), as points sorted by FLOPs and
  // interpolated in log(FLOPs); below the first point the first efficiency scales down linearly.
  std::vector<std::pair<double, double>> gemm_efficiency;
  double attention_efficiency = 0.5;    // fused attention's achieved / peak FLOP/s
  double elementwise_efficiency = 0.7;  // element-wise ops' achieved / peak memory bandwidth
  double launch_overhead_s = 0;         // seconds per op beyond its FLOPs and bytes
  LinkCost intra_node;                  // a collective whose group stays inside a node
  LinkCost inter_node;                  // one whose group spans nodes
  LinkCost host_link;                   // device <-> host copies (offload); unused on the host
  double host_adam_params_per_s = 0;    // offloaded Adam: parameters stepped per second per rank
  // Measured per collective and group size (calibrated hosts): overrides the link model there.
  std::map<Collective, std::map<int, LinkCost>> measured;
  // The host: cores its ranks share (a rank computes at min(1, cores / ranks on the node) of its
  // peak_flops, which are one core's times the threads it gets). 0: one device per rank.
  int cores = 0;
  nlohmann::json sources;  // field -> where the number comes from

  double peak(DType dtype) const;  // throws ValueError naming the dtype when the profile lacks it
  // Efficiency of one GEMM of `flops` FLOPs (the curve; never above its largest point).
  double gemm_efficiency_at(double flops) const;
  // Seconds for one `c` of `bytes` (each rank's payload) on `ranks` ranks, inside one node or not.
  double collective_seconds(Collective c, int64_t bytes, int ranks, bool crosses_nodes) const;
  // The factor a rank's compute slows by when `ranks_on_node` ranks share the node's cores
  // (1 without cores, or while ranks <= cores).
  double sharing_slowdown(int ranks_on_node) const;

  // Strict: unknown keys and wrong types throw ValueError naming the key.
  static ClusterProfile from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;
};

// The bundled profile names: "host", "dgx-a100-80g", "dgx-h100", "dgx-h200".
std::vector<std::string> bundled_cluster_names();
// A bundled name or a profile file. `nodes` 0: enough nodes for `world` ranks. "host": the
// calibrated profile at $TESSERA_HOST_PROFILE or ~/.cache/tessera/host-profile.json when there is
// one, else the bundled defaults for this machine. Throws ValueError naming the choices.
ClusterProfile load_cluster(const std::string& name_or_path, int world, int nodes = 0);

}  // namespace tessera::plan

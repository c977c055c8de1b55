// A cluster profile: what the planner knows of the machines a run lands on. Devices per node and
// their memory, peak FLOP/s per dtype, memory bandwidth, efficiency curves (GEMM by size,
// attention, element-wise), the links a collective crosses (inside a node, across nodes) and,
// for the host, the cores its ranks share. Profiles are JSON files (models/plan/profiles): the
// bundled ones name the source of every number beside it; `tessera plan calibrate` measures the
// host's (cluster "host").
//
// The host (cores > 0). Its ranks are processes on one machine of `cores` cores (logical CPUs,
// std::thread::hardware_concurrency) that share the cores and the memory:
//   - peak_flops[f32] is one core's FMA peak times `cores`: what one rank alone on the machine
//     reaches at 100% efficiency with a thread on every core. bf16 and f16 run through f32 GEMMs
//     on the CPU, so their peaks are the f32 peak scaled by the measured 16-bit / f32 GEMM speed.
//   - gemm_efficiency, attention_efficiency are achieved / peak_flops with every core in use;
//     elementwise_efficiency is an element-wise kernel's bytes/s over memory_bandwidth, which is
//     the whole machine's (a STREAM-triad-like copy over all cores).
//   - device_memory is the machine's RAM, shared by its ranks.
//   - A rank of R on the machine gets max(1, cores / R) threads (models/train/run_layout.cc
//     set_threads); while R <= cores it computes at threads / cores of the peak, and beyond the
//     cores R ranks time-share them (sharing_slowdown). compute_share() is that product.
// GPU clusters (cores == 0): every number is per device (one rank per device).
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
// `bandwidth` is what nccl-tests calls bus bandwidth: an achieved figure, not the wire's rate.
struct LinkCost {
  double latency_s = 0;
  double bandwidth = 0;  // bytes per second per rank, each way
  bool operator==(const LinkCost&) const = default;
};

enum class Collective {
  all_reduce,
  reduce_scatter,
  all_gather,
  broadcast,
  reduce,
  all_to_all,
  send_recv
};
inline constexpr Collective kCollectives[] = {Collective::all_reduce, Collective::reduce_scatter,
                                              Collective::all_gather, Collective::broadcast,
                                              Collective::reduce,     Collective::all_to_all,
                                              Collective::send_recv};
// "all_reduce", "reduce_scatter", ... (the JSON keys of `measured`).
const char* collective_name(Collective c);
// The inverse; throws ValueError listing the names.
Collective collective_from_name(const std::string& name);

// The ring algorithm's shape for `c` on `ranks` ranks: steps (each paying the link's latency) and
// the bytes each rank moves per payload byte. all_reduce 2 (p - 1) and 2 (p - 1) / p;
// reduce_scatter, all_gather, all_to_all (p - 1) and (p - 1) / p; broadcast and reduce
// ceil(log2 p) and 1; send_recv 1 and 1; nothing at p = 1.
struct RingShape {
  int steps = 0;
  double volume = 0;
};
RingShape ring_shape(Collective c, int ranks);

struct ClusterProfile {
  std::string name;  // "host", "dgx-a100-80g", ... or the file's stem
  std::string description;
  int devices_per_node = 1;   // ranks a node holds (the host: ranks per machine; see cores)
  int nodes = 1;              // set by load_cluster from --nodes or the world size
  int64_t device_memory = 0;  // bytes per device (the host: RAM shared by its ranks)
  // Peak FLOP/s of one device per compute dtype (f32, bf16, f16): dense, no sparsity.
  std::map<DType, double> peak_flops;
  double memory_bandwidth = 0;  // bytes/s of one device's memory
  // GEMM efficiency (achieved / peak) by a GEMM's FLOPs (2 m n k), as points sorted by FLOPs and
  // interpolated in log(FLOPs); below the first point the first efficiency scales down linearly.
  std::vector<std::pair<double, double>> gemm_efficiency;
  double attention_efficiency = 0.5;    // fused attention's achieved / peak FLOP/s, fwd + bwd
  double elementwise_efficiency = 0.7;  // element-wise ops' achieved / peak memory bandwidth
  double launch_overhead_s = 0;         // seconds per op beyond its FLOPs and bytes
  // What a transformer block and a micro-batch cost beyond their FLOPs and bytes, forward and
  // backward: the modules, autograd graph, views and small kernels of a block, and the
  // embeddings, head, loss and step plumbing of a micro-batch (calibrate times a model too small
  // to compute anything; 0 where not measured).
  double block_overhead_s = 0;
  double micro_batch_overhead_s = 0;
  LinkCost intra_node;                  // a collective whose group stays inside a node
  LinkCost inter_node;                  // one whose group spans nodes: one NIC's share per rank
  LinkCost host_link;                   // device <-> host copies (offload); unused on the host
  double host_adam_params_per_s = 0;    // offloaded Adam: parameters stepped per second per rank
  // Measured per collective and group size (calibrated hosts): overrides the link model for
  // groups inside a node. Each entry is the ring model's latency per step and bandwidth fitted to
  // that collective's times at that group size.
  std::map<Collective, std::map<int, LinkCost>> measured;
  // The host: seconds a collective waits beyond its link cost when the node's ranks compute
  // between calls and share its cores (a peer the scheduler has not run yet), by the number of
  // ranks on the node; measured by `tessera plan calibrate`. Empty: 0 (one rank per device).
  std::map<int, double> loaded_wait_s;
  // The host: cores its ranks share (see the top of this file). 0: one device per rank.
  int cores = 0;
  nlohmann::json sources = nlohmann::json::object();  // field path ("peak_flops.bf16",
                                                      // "intra_node") -> where it comes from

  double peak(DType dtype) const;  // throws ValueError naming the dtype when the profile lacks it
  // Efficiency of one GEMM of `flops` FLOPs (the curve; never above its largest point).
  double gemm_efficiency_at(double flops) const;
  // Seconds for one `c` of `bytes` (the full payload: all_reduce's tensor, all_gather's output,
  // reduce_scatter's input) on `ranks` ranks, inside one node or not. A group spanning nodes with
  // `ranks_per_node` of its ranks on each node drives that many NICs at once (NCCL runs one ring
  // per NIC), so it moves min(ranks_per_node x inter_node.bandwidth, intra_node.bandwidth).
  double collective_seconds(Collective c, int64_t bytes, int ranks, bool crosses_nodes,
                            int ranks_per_node = 1) const;
  // The link model for `c` on `ranks` ranks inside a node: `measured` when it has the collective
  // (interpolated over group sizes), else intra_node.
  LinkCost intra_node_cost(Collective c, int ranks) const;
  // The factor a rank's compute slows by when `ranks_on_node` ranks share the node's cores
  // (1 without cores, or while ranks <= cores).
  double sharing_slowdown(int ranks_on_node) const;
  // The fraction of peak() one of `ranks_on_node` ranks computes at: max(1, cores / ranks)
  // threads of the cores, divided by sharing_slowdown. 1 without cores.
  double compute_share(int ranks_on_node) const;
  // loaded_wait_s at `ranks_on_node`: linear between measured sizes, the nearest outside them.
  double loaded_wait(int ranks_on_node) const;

  // Strict: unknown keys and wrong types throw ValueError naming the key.
  static ClusterProfile from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;
  bool operator==(const ClusterProfile&) const = default;
};

// The bundled profile names: "host", "dgx-a100-80g", "dgx-h100", "dgx-h200".
std::vector<std::string> bundled_cluster_names();
// A bundled profile exactly as its file holds it (no host detection). Throws naming the choices.
ClusterProfile bundled_cluster(const std::string& name);
// The raw JSON text of a bundled profile (its sources included), for tests and `plan` output.
const std::string& bundled_cluster_text(const std::string& name);
// A bundled name or a profile file. `nodes` 0: enough nodes for `world` ranks. "host": the
// calibrated profile at $TESSERA_HOST_PROFILE or ~/.cache/tessera/host-profile.json when there is
// one, else the bundled defaults for this machine (cores, RAM, and a quick measurement of one
// core's FMA peak, a one-core GEMM and the memory bandwidth: see host_probe.h). Throws ValueError
// naming the choices.
ClusterProfile load_cluster(const std::string& name_or_path, int world, int nodes = 0);
// Where `tessera plan calibrate` writes and load_cluster("host") reads the host's profile:
// $TESSERA_HOST_PROFILE when set, else $HOME/.cache/tessera/host-profile.json.
std::string host_profile_path();

}  // namespace tessera::plan

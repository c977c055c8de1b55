// ZeRO's lines for the run's header and its auto placement's report (zero_report.h).
#include "models/train/zero_report.h"

#include <cstdio>

namespace tessera::train {

std::string describe_zero(const parallel::zero::ShardedOptimizer& zero, bool built_sharded) {
  int64_t total = 0, mine = 0;
  for (const auto& g : zero.plan().groups) {
    total += g.numel;
    mine += g.shard_numel;
  }
  const int n = zero.comm()->size();
  const char* more = "";
  if (zero.stage() == 2) more = " and reduces only its shard's gradients";
  if (zero.stage() == 3)
    more =
        ", reduces only its shard's gradients and holds only its shard of the parameters, "
        "gathering each on use";
  char line[480];
  std::snprintf(line, sizeof line,
                "  zero: stage %d over %d data rank%s: each keeps 1/%d of the f32 masters and "
                "optimizer state (%lld of %lld elements)%s%s",
                zero.stage(), n, n == 1 ? "" : "s", n, static_cast<long long>(mine),
                static_cast<long long>(total), more,
                !zero.offloaded()      ? ""
                : zero.overlaps_step() ? "; masters and optimizer state offloaded to host "
                                         "memory, stepped there by the CPU Adam range by range "
                                         "during backward"
                                       : "; masters and optimizer state offloaded to host "
                                         "memory, stepped there by the CPU Adam");
  std::string out = line;
  if (built_sharded)
    out +=
        "\n  zero: built sharded (zero.sharded_init): each parameter left this rank's pieces "
        "in its shards as it was drawn, so no rank held the whole model";
  if (const parallel::zero::Stage3Params* s3 = zero.stage3(); s3 && s3->chunked()) {
    // Where the parameter shards wait between uses (param_placement.h).
    const parallel::zero::Stage3Placement p = s3->placement();
    const parallel::zero::ParamPlacement& how = s3->options().placement;
    out += "\n  zero: parameter shards in " + std::to_string(p.chunks) + " chunks, " +
           (how.policy == parallel::zero::PlacementPolicy::auto_traced
                ? "placed after a warm-up step (all on the host) to keep the device under " +
                      std::to_string(how.device_limit) + " bytes"
                : std::to_string(p.chunks - p.device_chunks) + " of them on the host (static)");
  }
  return out;
}

std::string zero_placement_report(const parallel::zero::ShardedOptimizer& zero) {
  const parallel::zero::Stage3Params* s3 = zero.stage3();
  if (!s3 || !s3->chunked() ||
      s3->options().placement.policy != parallel::zero::PlacementPolicy::auto_traced)
    return "";
  const parallel::zero::Stage3Placement p = s3->placement();
  char line[480];
  std::snprintf(line, sizeof line,
                "zero: the warm-up step peaked at %.2f MiB of device memory with every parameter "
                "chunk on the host; %lld of %lld chunks (%.2f MiB) now on the device, %.2f MiB "
                "on the host (rank 0); every chunk stays on the host, and within each step "
                "device copies follow the warm-up's trace, the chunk read latest evicted first",
                double(p.warmup_peak_bytes) / (1 << 20), static_cast<long long>(p.device_chunks),
                static_cast<long long>(p.chunks), double(p.device_bytes) / (1 << 20),
                double(p.host_bytes) / (1 << 20));
  return line;
}

}  // namespace tessera::train

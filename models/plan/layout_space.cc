// The layout search space (see layout_space.h).
#include "models/plan/layout_space.h"

#include <cstdio>

#include "core/error.h"
#include "models/plan/workload.h"
#include "parallel/pipeline/schedule.h"
#include "parallel/sequence/modes.h"

namespace tessera::plan {
namespace {

using parallel::TensorMode;
using parallel::pipeline::ScheduleKind;
using parallel::sequence::SequenceAttentionMode;

std::vector<int> divisors(int n) {
  std::vector<int> out;
  for (int d = 1; d <= n; ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

// The tensor-parallel choices for t ranks.
std::vector<parallel::TensorParallelConfig> tensor_choices(int t) {
  std::vector<parallel::TensorParallelConfig> out;
  if (t == 1) return {parallel::TensorParallelConfig{}};
  out.push_back({t, TensorMode::one_d, 1, false});
  out.push_back({t, TensorMode::one_d, 1, true});
  // A grid mode fits when its side exists (tensor_grid_dim is -1 otherwise) and exceeds 1.
  const auto fits = [](const parallel::TensorParallelConfig& c) {
    return parallel::tensor_grid_dim(c) > 1;
  };
  if (fits({t, TensorMode::two_d, 1, false})) out.push_back({t, TensorMode::two_d, 1, false});
  for (int depth = 2; depth <= t; ++depth) {
    const parallel::TensorParallelConfig c{t, TensorMode::two_point_five_d, depth, false};
    if (t % depth == 0 && fits(c)) out.push_back(c);
  }
  if (fits({t, TensorMode::three_d, 1, false})) out.push_back({t, TensorMode::three_d, 1, false});
  return out;
}

std::string gib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / double(1 << 30));
  return buf;
}

}  // namespace

std::vector<Layout> candidate_layouts(const train::TrainConfig& config, int world) {
  const Workload w = workload_of(config);
  std::vector<Layout> out;
  for (int t : divisors(world)) {
    for (const parallel::TensorParallelConfig& tensor : tensor_choices(t)) {
      for (int p : divisors(world / t)) {
        if (p > w.n_layers) continue;
        std::vector<std::pair<ScheduleKind, int>> schedules = {{ScheduleKind::one_f_one_b, 1}};
        if (p > 1) {
          schedules.push_back({ScheduleKind::gpipe, 1});
          schedules.push_back({ScheduleKind::zero_bubble, 1});
          for (int v = 2; int64_t(v) * p <= w.n_layers && v <= 4; ++v)
            if (w.n_layers % (int64_t(v) * p) == 0) schedules.push_back({ScheduleKind::interleaved, v});
        }
        for (int s : divisors(world / (t * p))) {
          std::vector<SequenceAttentionMode> modes = {SequenceAttentionMode::ring_flash};
          if (s > 1) modes = {SequenceAttentionMode::ring_flash, SequenceAttentionMode::ring,
                              SequenceAttentionMode::all_to_all};
          const int data = world / (t * p * s);
          if (w.batch % data != 0) continue;
          const int64_t share = w.batch / data;
          for (const auto& [schedule, v] : schedules)
            for (SequenceAttentionMode mode : modes)
              for (int stage = 0; stage <= (data > 1 ? 3 : 0); ++stage)
                for (int offload = 0; offload <= (stage > 0 ? 1 : 0); ++offload)
                  for (int mb = 1; mb <= share; ++mb) {
                    if (share % mb != 0) continue;
                    for (int ckpt = 0; ckpt <= 1; ++ckpt) {
                      Layout l;
                      l.parallel.data = data;
                      l.parallel.pipeline = p;
                      l.parallel.pipeline_options.schedule = schedule;
                      l.parallel.pipeline_options.virtual_stages = v;
                      l.parallel.sequence = s;
                      l.parallel.sequence_mode = mode;
                      l.parallel.tensor = tensor;
                      l.zero = config.zero;
                      l.zero.stage = stage;
                      l.zero.offload = offload == 1;
                      if (!l.zero.offload) l.zero.overlap_step = false, l.zero.offload_params = false;
                      l.micro_batch_size = mb;
                      l.checkpoint = ckpt == 1;
                      out.push_back(l);
                    }
                  }
        }
      }
    }
  }
  return out;
}

nlohmann::json layout_json(const Layout& l) {
  return {{"parallel", l.parallel.to_json()},
          {"zero", {{"stage", l.zero.stage}, {"offload", l.zero.offload}}},
          {"micro_batch_size", l.micro_batch_size},
          {"checkpoint", l.checkpoint}};
}

std::string memory_misfit(const std::vector<int64_t>& stages, int per_stage,
                          const ClusterProfile& c) {
  if (c.device_memory <= 0 || stages.empty()) return "";
  if (c.cores > 0) {
    // The host: every rank on one machine, sharing its memory.
    int64_t sum = 0;
    for (int64_t peak : stages) sum += peak * per_stage;
    if (sum <= c.device_memory) return "";
    return str_cat("out of memory: the ", stages.size() * size_t(per_stage), " ranks need ",
                   gib(sum), " together, ", gib(sum - c.device_memory),
                   " more than the machine's ", gib(c.device_memory));
  }
  for (size_t s = 0; s < stages.size(); ++s)
    if (stages[s] > c.device_memory)
      return str_cat("out of memory: rank ", s * size_t(per_stage), " needs ", gib(stages[s]), ", ",
                     gib(stages[s] - c.device_memory), " more than a device's ",
                     gib(c.device_memory));
  return "";
}

}  // namespace tessera::plan

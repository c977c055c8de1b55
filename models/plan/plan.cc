// Predictions and the layout search (see plan.h).
#include "models/plan/plan.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "core/error.h"
#include "models/plan/layout_space.h"
#include "models/plan/memory_model.h"
#include "models/plan/schedule_cache.h"
#include "models/plan/time_model.h"
#include "models/plan/workload.h"
#include "models/train/run_layout.h"
#include "parallel/pipeline/partition.h"
#include "parallel/pipeline/schedule.h"

namespace tessera::plan {
namespace {

bool& model_checkpoint(train::TrainConfig& c) {
  switch (c.kind) {
    case train::ModelKind::bert:
      return c.bert.checkpoint;
    case train::ModelKind::vit:
      return c.vit.checkpoint;
    default:
      return c.gpt.checkpoint;
  }
}

}  // namespace

train::TrainConfig with_layout(const train::TrainConfig& config, const Layout& layout) {
  train::TrainConfig c = config;
  c.parallel = layout.parallel;
  c.data_size_given = true;
  c.zero = layout.zero;
  c.train.micro_batch_size = layout.micro_batch_size;
  model_checkpoint(c) = layout.checkpoint;
  c.parallel_auto = false;
  return c;
}

namespace {

// Every pipeline rank's blocks, whether it holds the embeddings or the head, and the
// micro-batches it holds at its peak (the schedule simulator's count of forwarded chunks whose
// backward has not run, in whole stages' worth).
std::vector<RankPlace> places(const Workload& w, const Layout& l, int micro_batches) {
  const parallel::ParallelConfig& p = l.parallel;
  const int v = p.pipeline_options.virtual_stages;
  const std::vector<parallel::pipeline::BlockRange> ranges = parallel::pipeline::partition_blocks(
      p.pipeline_options.partition, w.n_layers, p.pipeline * v,
      std::vector<int64_t>(size_t(w.n_layers), w.block_parameters));
  std::vector<HeldChunks> held(size_t(p.pipeline), HeldChunks{v, 0, 0, 0, v});
  if (p.pipeline > 1)
    held = held_chunks({p.pipeline_options.schedule, p.pipeline, v, micro_batches});
  // Chunks to whole stages' worth (a stage holds v chunks of blocks / v each).
  const auto stages_worth = [v](int chunks) { return double(chunks) / v; };
  std::vector<RankPlace> out(size_t(p.pipeline));
  for (int s = 0; s < p.pipeline; ++s) {
    RankPlace& r = out[size_t(s)];
    r.stage = s;
    for (int chunk = 0; chunk < v; ++chunk) {
      const auto& range = ranges[size_t(chunk * p.pipeline + s)];
      r.blocks += range.end - range.begin;
    }
    r.first = s == 0;
    r.last = s == p.pipeline - 1;
    const HeldChunks& h = held[size_t(s)];
    r.in_flight = std::max(1.0 / v, stages_worth(h.in_flight));
    r.deferred_then = stages_worth(h.deferred_then);
    r.deferred = stages_worth(h.deferred);
    r.in_flight_then = stages_worth(h.in_flight_then);
    r.in_flight_later = std::max(1.0 / v, stages_worth(h.in_flight_later));
    r.micro_batches = micro_batches;
  }
  return out;
}

}  // namespace

std::vector<int64_t> Prediction::peak_bytes_ranks() const {
  std::vector<int64_t> out;
  out.reserve(peak_bytes_stages.size() * size_t(ranks_per_stage));
  for (int64_t peak : peak_bytes_stages) out.insert(out.end(), size_t(ranks_per_stage), peak);
  return out;
}

int64_t MemoryParts::total() const {
  return parameters + gradients + master_weights + optimizer_state + activations + comm_buffers +
         temporary + other;
}

nlohmann::json MemoryParts::to_json() const {
  return {{"parameters", parameters},     {"gradients", gradients},
          {"master_weights", master_weights}, {"optimizer_state", optimizer_state},
          {"activations", activations},   {"comm_buffers", comm_buffers},
          {"temporary", temporary},       {"other", other},
          {"total", total()}};
}

nlohmann::json Prediction::to_json() const {
  nlohmann::json comm = nlohmann::json::object();
  for (const auto& [group, bytes] : comm_bytes_per_rank) comm[group] = bytes;
  nlohmann::json time = nlohmann::json::object();
  for (const auto& [part, seconds] : time_parts) time[part] = seconds;
  return {{"layout", layout_json(layout)},
          {"feasible", feasible},
          {"why", why.empty() ? nlohmann::json(nullptr) : nlohmann::json(why)},
          {"step_seconds", step_seconds},
          {"tokens_per_second", tokens_per_second},
          {"mfu", mfu},
          {"peak_bytes", peak_bytes},
          {"peak_rank", peak_rank},
          {"peak_bytes_ranks", peak_bytes_ranks()},
          {"host_bytes", host_bytes},
          {"comm_bytes_per_rank", comm},
          {"bubble", bubble},
          {"memory", peak_parts.to_json()},
          {"time", time}};
}

Prediction predict_layout(const train::TrainConfig& config, const Layout& layout, int world,
                          const ClusterProfile& cluster) {
  Prediction out;
  out.layout = layout;
  train::TrainConfig c = with_layout(config, layout);
  int64_t micro_batches = 0;
  try {
    micro_batches = train::resolve_layout(c, world);
  } catch (const std::exception& e) {
    out.feasible = false;
    out.why = train::error_text(e);
    return out;
  }
  out.layout.micro_batch_size = c.train.micro_batch_size;
  Workload w = workload_of(c);
  w.widened_products = cluster.cores > 0;  // the host computes on the CPU backend
  const Layout& l = out.layout;
  const std::vector<RankPlace> stages = places(w, l, int(micro_batches));

  // Memory per stage (every rank of a stage holds the same), then whether it fits; a layout that
  // does not fit is not timed.
  out.ranks_per_stage = world / l.parallel.pipeline;
  int64_t largest_stage_blocks = 0, largest_local = 0;
  for (const RankPlace& place : stages) {
    int64_t host = 0;
    const MemoryParts parts = rank_memory(w, l, place, &host);
    out.peak_bytes_stages.push_back(parts.total());
    if (parts.total() > out.peak_bytes) {
      out.peak_bytes = parts.total();
      out.peak_rank = place.stage * out.ranks_per_stage;
      out.peak_parts = parts;
    }
    out.host_bytes = std::max(out.host_bytes, host);
    largest_stage_blocks = std::max(largest_stage_blocks, place.blocks);
    largest_local = std::max(largest_local, local_parameters(w, l, place));
  }
  const std::string fit = memory_misfit(out.peak_bytes_stages, out.ranks_per_stage, cluster);
  if (!fit.empty()) {
    out.feasible = false;
    out.why = fit;
    return out;
  }
  const StepTime time = step_time(w, l, int(micro_batches), largest_stage_blocks, largest_local,
                                  cluster, world);
  out.step_seconds = time.seconds;
  out.bubble = time.bubble;
  out.time_parts = time.parts;
  out.comm_bytes_per_rank = time.bytes_per_rank;
  const double samples = double(w.batch);
  out.tokens_per_second = samples * double(w.units_per_sample()) / time.seconds;
  const double model_flops = 3.0 * w.forward_flops_per_sample() * samples;
  // The host's peak is its machine's (its ranks share the cores); a GPU cluster's one device's.
  const double peak =
      cluster.peak(w.dtype) * double(cluster.cores > 0 ? cluster.nodes : world);
  out.mfu = model_flops / (time.seconds * peak);
  return out;
}

Prediction predict(const train::TrainConfig& config, int world, const ClusterProfile& cluster) {
  Layout layout;
  layout.parallel = config.parallel;
  if (!config.data_size_given) {
    const int others = layout.parallel.pipeline * layout.parallel.sequence *
                       layout.parallel.tensor.size;
    layout.parallel.data = std::max(1, world / others);
  }
  layout.zero = config.zero;
  layout.micro_batch_size = config.train.micro_batch_size;
  layout.checkpoint = workload_of(config).checkpoint;
  return predict_layout(config, layout, world, cluster);
}

std::vector<Prediction> search(const train::TrainConfig& config, int world,
                               const ClusterProfile& cluster, const SearchOptions& options) {
  std::vector<Prediction> feasible, refused;
  // Each prediction copies the config: without the file's JSON the copies are cheap.
  train::TrainConfig lean = config;
  lean.source = nlohmann::json();
  for (const Layout& layout : candidate_layouts(config, world)) {
    Prediction p = predict_layout(lean, layout, world, cluster);
    if (p.feasible)
      feasible.push_back(std::move(p));
    else if (options.include_infeasible)
      refused.push_back(std::move(p));
  }
  std::stable_sort(feasible.begin(), feasible.end(), [](const Prediction& a, const Prediction& b) {
    return a.step_seconds < b.step_seconds;
  });
  feasible.insert(feasible.end(), std::make_move_iterator(refused.begin()),
                  std::make_move_iterator(refused.end()));
  return feasible;
}

std::vector<int64_t> layout_code(const Layout& l) {
  const parallel::ParallelConfig& p = l.parallel;
  return {p.data,
          p.pipeline,
          int64_t(p.pipeline_options.schedule),
          p.pipeline_options.virtual_stages,
          p.sequence,
          int64_t(p.sequence_mode),
          p.tensor.size,
          int64_t(p.tensor.mode),
          p.tensor.depth,
          p.tensor.sequence_parallel,
          l.zero.stage,
          l.zero.offload,
          l.micro_batch_size,
          l.checkpoint};
}

Layout layout_from_code(const std::vector<int64_t>& code, const train::ZeroSection& base) {
  TS_CHECK(code.size() == 14, "plan", "expected a layout code of 14 integers, got ", code.size());
  TS_CHECK(code[2] >= 0 && code[2] <= int64_t(parallel::pipeline::ScheduleKind::zero_bubble) &&
               code[5] >= 0 &&
               code[5] <= int64_t(parallel::sequence::SequenceAttentionMode::ring_flash) &&
               code[7] >= 0 && code[7] <= int64_t(parallel::TensorMode::three_d),
           "plan", "expected a layout code's enums in range, got schedule ", code[2],
           ", sequence mode ", code[5], ", tensor mode ", code[7]);
  Layout l;
  parallel::ParallelConfig& p = l.parallel;
  p.data = int(code[0]);
  p.pipeline = int(code[1]);
  p.pipeline_options.schedule = parallel::pipeline::ScheduleKind(code[2]);
  p.pipeline_options.virtual_stages = int(code[3]);
  p.sequence = int(code[4]);
  p.sequence_mode = parallel::sequence::SequenceAttentionMode(code[5]);
  p.tensor = {int(code[6]), parallel::TensorMode(code[7]), int(code[8]), code[9] != 0};
  l.zero = base;
  l.zero.stage = code[10];
  l.zero.offload = code[11] != 0;
  if (!l.zero.offload) l.zero.overlap_step = false, l.zero.offload_params = false;
  l.micro_batch_size = code[12];
  l.checkpoint = code[13] != 0;
  return l;
}

nlohmann::json layout_config(const train::TrainConfig& config, const Layout& layout) {
  nlohmann::json j = config.source;
  const nlohmann::json l = layout_json(layout);
  j["parallel"] = l["parallel"];
  if (!j.contains("zero") || !j["zero"].is_object()) j["zero"] = nlohmann::json::object();
  for (const auto& [key, value] : l["zero"].items()) j["zero"][key] = value;
  // Keys that only a stage or offload accepts go with them.
  if (!layout.zero.offload || layout.zero.stage == 0) {
    for (const char* key : {"overlap_step", "offload_params", "placement", "offload_param_frac",
                            "device_memory_limit", "chunk_mb"})
      j["zero"].erase(key);
  }
  if (layout.zero.stage != 3)
    for (const char* key : {"prefetch", "live_params", "sharded_init"}) j["zero"].erase(key);
  j["train"]["micro_batch_size"] = layout.micro_batch_size;
  j["model"]["checkpoint"] = layout.checkpoint;
  return j;
}

}  // namespace tessera::plan

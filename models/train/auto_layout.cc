// "parallel": "auto" (see auto_layout.h).
#include "models/train/auto_layout.h"

#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "core/factory.h"
#include "models/plan/validation.h"
#include "models/train/progress.h"
#include "parallel/comm/agreed.h"

namespace tessera::train {
namespace {

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f s", s);
  return buf;
}

}  // namespace

AutoLayout choose_auto_layout(TrainConfig& config, parallel::Communicator* world) {
  const int ranks = world ? world->size() : 1;
  const bool root = !world || world->rank() == 0;
  AutoLayout chosen;
  std::vector<int64_t> code(14, 0);
  // Rank 0 alone plans (the host profile probes this machine, so ranks could disagree); a
  // failure there is every rank's.
  parallel::run_agreed(world, [&] {
    if (!root) return;
    const char* env = std::getenv("TESSERA_CLUSTER");
    const plan::ClusterProfile cluster = plan::load_cluster(env && *env ? env : "host", ranks);
    chosen.cluster = cluster.name;
    const std::vector<plan::Prediction> ranked =
        plan::search(config, ranks, cluster, {.include_infeasible = false});
    TS_CHECK(!ranked.empty(), "config",
             "parallel: auto: no layout of ", ranks, " ranks fits cluster ", cluster.name,
             " (tessera plan --config FILE --world ", ranks, " --search lists why each is refused)");
    chosen.prediction = ranked.front();
    code = plan::layout_code(chosen.prediction.layout);
  });
  if (world && ranks > 1) {
    Tensor shared = from_vector<int64_t>(code, {int64_t(code.size())});
    world->broadcast(shared, 0)->wait();
    const int64_t* values = shared.data<int64_t>();
    code.assign(values, values + code.size());
  }
  const plan::Layout layout = plan::layout_from_code(code, config.zero);
  if (!root) chosen.prediction.layout = layout;
  config = plan::with_layout(config, layout);
  resolve_sequence_layout(config);
  return chosen;
}

std::string describe_auto_layout(const AutoLayout& chosen) {
  const plan::Prediction& p = chosen.prediction;
  return str_cat("layout (parallel: auto, cluster ", chosen.cluster, "): ",
                 plan::layout_text(p.layout), ": predicted ", seconds(p.step_seconds),
                 " per step, peak ", Progress::format_bytes(p.peak_bytes), " on rank ", p.peak_rank);
}

std::string compare_auto_layout(const AutoLayout& chosen, double measured_step_seconds,
                                int64_t measured_peak_bytes, int measured_peak_rank) {
  const plan::Prediction& p = chosen.prediction;
  return str_cat("planned against measured: step ", seconds(p.step_seconds), " / ",
                 seconds(measured_step_seconds), " (median), peak ", Progress::format_bytes(p.peak_bytes),
                 " on rank ", p.peak_rank, " / ", Progress::format_bytes(measured_peak_bytes), " on rank ",
                 measured_peak_rank);
}

}  // namespace tessera::train

// `tessera plan`: the planner (models/plan) on a config's own layout, or a search over every
// layout of N ranks, printed as tables or as JSON; `plan calibrate` and `plan validate` are their own files.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>

#include "core/error.h"
#include "models/plan/layout_space.h"
#include "models/plan/plan.h"
#include "models/plan/validation.h"
#include "models/plan/workload.h"
#include "models/train/progress.h"
#include "models/train/train_config.h"
#include "tools/cli/commands.h"

namespace tessera::cli {
namespace {

using train::Progress;

const char* const kPlanUsage =
    "usage: tessera plan --config FILE --world N [--cluster C] [--nodes M] [--json]\n"
    "       tessera plan --config FILE --world N --search [--top K] [--write-config OUT] [--json]\n"
    "       tessera plan calibrate [--out FILE] [--quick]     (mpirun -np N for collectives)\n"
    "       tessera plan validate --config FILE --world N [--layouts K] [--steps S]\n"
    "  --world N          ranks the job runs on\n"
    "  --cluster C        host (default: this machine, as `plan calibrate` measured it, else a\n"
    "                     quick probe),\n"
    "                     dgx-a100-80g, dgx-h100, dgx-h200, or a profile file\n"
    "  --nodes M          nodes of the cluster (default: enough for N ranks)\n"
    "  --search           every legal layout ranked by predicted step time\n"
    "  --top K            layouts printed by --search (default 10)\n"
    "  --write-config OUT the best layout as a config `tessera train` runs\n"
    "  --set KEY=VALUE    override one config key first, as `tessera train` does\n";

struct PlanArgs {
  PlanJob job;
  std::string write_config;
  int nodes = 0, top = 10;
  bool json = false, search = false, help = false;
};

PlanArgs parse(const std::vector<std::string>& args) {
  PlanArgs a;
  ArgReader r(args, "plan");
  while (r.next()) {
    const std::string& n = r.name();
    if (r.help())
      a.help = true;
    else if (r.plan_job(a.job))
      continue;
    else if (n == "--nodes")
      a.nodes = int(ArgReader::to_int(n, r.value()));
    else if (n == "--top")
      a.top = int(ArgReader::to_int(n, r.value()));
    else if (n == "--write-config")
      a.write_config = r.value();
    else if (n == "--json")
      a.json = true;
    else if (n == "--search")
      a.search = true;
    else
      r.unknown();
  }
  if (a.help) return a;
  ArgReader::check_plan_job(a.job, "plan");
  TS_CHECK(a.top >= 1, "plan", "expected --top K >= 1, got ", a.top);
  return a;
}

std::string fixed(double v, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

void print_prediction(const plan::Prediction& p, std::ostream& out) {
  out << "layout      " << plan::layout_text(p.layout) << "\n";
  if (!p.feasible) out << "NOT FEASIBLE: " << p.why << "\n";
  if (p.peak_bytes_stages.empty()) return;
  out << "step        " << fixed(p.step_seconds, 4) << " s, " << fixed(p.tokens_per_second, 0)
      << " units/s, MFU " << fixed(100 * p.mfu, 2) << "%, pipeline bubble "
      << fixed(100 * p.bubble, 1) << "%\n";
  out << "peak        " << Progress::format_bytes(p.peak_bytes) << " on rank " << p.peak_rank;
  if (p.host_bytes > 0) out << " (+ " << Progress::format_bytes(p.host_bytes) << " offloaded to the host)";
  out << "\n  parts of rank " << p.peak_rank << "'s peak:\n";
  const nlohmann::json parts = p.peak_parts.to_json();
  for (auto it = parts.begin(); it != parts.end(); ++it)
    if (it.key() != "total")
      out << "    " << it.key() << std::string(18 - it.key().size(), ' ')
          << Progress::format_bytes(it.value().get<int64_t>()) << "\n";
  out << "  per pipeline stage (" << p.ranks_per_stage << " rank(s) each):";
  for (int64_t b : p.peak_bytes_stages) out << " " << fixed(double(b) / (1 << 20), 1) << " MiB";
  out << "\n";
  out << "time        ";
  for (const auto& [part, s] : p.time_parts) out << part << " " << fixed(s, 4) << " s  ";
  out << "\nsent/rank   ";
  if (p.comm_bytes_per_rank.empty()) out << "nothing";
  for (const auto& [group, bytes] : p.comm_bytes_per_rank)
    out << group << " " << fixed(double(bytes) / (1 << 20), 2) << " MiB  ";
  out << "\n";
}

void print_search(const std::vector<plan::Prediction>& all, int top, std::ostream& out) {
  int feasible = 0;
  for (const plan::Prediction& p : all) feasible += p.feasible;
  out << all.size() << " layouts, " << feasible << " feasible; the best " << std::min(top, feasible)
      << ":\n";
  out << "  #  step s     units/s    MFU%   peak MiB  bubble%  layout\n";
  for (int i = 0; i < std::min(top, feasible); ++i) {
    const plan::Prediction& p = all[size_t(i)];
    char line[160];
    std::snprintf(line, sizeof line, "%3d  %-9.4f  %-9.0f  %5.1f  %8.1f  %7.1f  ", i + 1,
                  p.step_seconds, p.tokens_per_second, 100 * p.mfu,
                  double(p.peak_bytes) / double(1 << 20), 100 * p.bubble);
    out << line << plan::layout_text(p.layout) << "\n";
  }
  // The refusals, grouped by their reason's first words.
  std::map<std::string, int> reasons;
  for (const plan::Prediction& p : all)
    if (!p.feasible) ++reasons[p.why.substr(0, p.why.find(':', 10))];
  if (!reasons.empty()) out << "refused:\n";
  for (const auto& [why, count] : reasons) out << "  " << count << " x " << why << "\n";
}

int plan_main(const std::vector<std::string>& args) {
  const PlanArgs a = parse(args);
  if (a.help) {
    std::cout << kPlanUsage;
    return 0;
  }
  const train::TrainConfig config = train::load_train_config(a.job.config, a.job.sets);
  const plan::ClusterProfile cluster = plan::load_cluster(a.job.cluster, a.job.world, a.nodes);
  if (!a.search) {
    const plan::Prediction p = plan::predict(config, a.job.world, cluster);
    if (a.json)
      std::cout << p.to_json().dump(2) << "\n";
    else {
      std::cout << "plan: " << a.job.config << " on " << a.job.world << " ranks of " << cluster.name
                << " (" << cluster.nodes << " node(s))\n";
      print_prediction(p, std::cout);
    }
    return p.feasible ? 0 : 1;
  }
  const std::vector<plan::Prediction> all = plan::search(config, a.job.world, cluster);
  if (a.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const plan::Prediction& p : all) list.push_back(p.to_json());
    std::cout << list.dump(2) << "\n";
  } else {
    std::cout << "plan --search: " << a.job.config << " on " << a.job.world << " ranks of " << cluster.name
              << " (" << cluster.nodes << " node(s))\n";
    print_search(all, a.top, std::cout);
  }
  if (all.empty() || !all.front().feasible) {
    std::cerr << "tessera plan: no layout of " << a.job.world << " ranks fits\n";
    return 1;
  }
  if (!a.write_config.empty()) {
    std::ofstream f(a.write_config);
    TS_CHECK(f.good(), "plan", "cannot write --write-config ", a.write_config);
    f << plan::layout_config(config, all.front().layout).dump(2) << "\n";
    if (!a.json) std::cout << "wrote the best layout to " << a.write_config << "\n";
  }
  return 0;
}

}  // namespace

int run_plan(int argc, char** argv, const std::vector<std::string>& args) {
  try {
    if (!args.empty() && args[0] == "calibrate")
      return run_plan_calibrate(argc, argv, {args.begin() + 1, args.end()});
    if (!args.empty() && args[0] == "validate")
      return run_plan_validate(argv[0], {args.begin() + 1, args.end()});
    return plan_main(args);
  } catch (const std::exception& e) {
    std::cerr << "tessera plan: " << train::error_text(e) << "\n";
    return 2;
  }
}

}  // namespace tessera::cli

// train.profile (see step_profile.h).
#include "models/train/step_profile.h"

#include <sstream>

#include "core/profiler.h"

namespace tessera::train {

StepProfile::StepProfile(const TrainSection& train, int rank, int world_size)
    : first_(train.profile_first),
      last_(train.profile_last),
      path_(rank_path(train.profile_path, rank, world_size)),
      rank_(rank) {}

std::string StepProfile::rank_path(const std::string& path, int rank, int world_size) {
  if (world_size <= 1) return path;
  const size_t slash = path.find_last_of('/');
  const size_t dot = path.find_last_of('.');
  const bool has_ext = dot != std::string::npos && (slash == std::string::npos || dot > slash);
  const std::string tag = ".rank" + std::to_string(rank);
  return has_ext ? path.substr(0, dot) + tag + path.substr(dot) : path + tag;
}

void StepProfile::before_step(int64_t step) {
  if (active() && step == first_) profiler::start();
}

std::string StepProfile::after_step(int64_t step) {
  if (!active() || step != last_) return "";
  const std::vector<profiler::Event> events = profiler::stop();
  profiler::write_chrome_trace(path_, events, rank_);
  int64_t step_ns = 0;
  for (const profiler::Event& e : events)
    if (e.category == std::string("step") && e.name == "train_step") step_ns += e.dur_ns;
  std::ostringstream os;
  os << "profile of steps " << first_ << "-" << last_ << " on rank " << rank_ << ": "
     << events.size() << " events, trace in " << path_ << " (open it in Perfetto or "
     << "chrome://tracing); time by family, exclusive of what it calls, as a share of the steps\n"
     << profiler::format_summary(profiler::summarize(events), step_ns);
  return os.str();
}

}  // namespace tessera::train

// train.profile: records steps [first, last] with core/profiler.h, writes each rank's Chrome
// trace and gives rank 0's table of time per op family and phase, as a share of those steps.
#pragma once

#include <cstdint>
#include <string>

#include "models/train/train_config.h"

namespace tessera::train {

class StepProfile {
 public:
  StepProfile(const TrainSection& train, int rank, int world_size);

  bool active() const { return first_ > 0; }
  // Around each step (1-based numbers): starts recording before `first`; after `last` stops,
  // writes this rank's trace and returns the report (empty on other steps, or when off).
  void before_step(int64_t step);
  std::string after_step(int64_t step);

  // "trace.json" on one rank; "trace.rank3.json" for rank 3 of several.
  static std::string rank_path(const std::string& path, int rank, int world_size);

 private:
  int64_t first_ = 0, last_ = 0;
  std::string path_;
  int rank_ = 0;
};

}  // namespace tessera::train

// Learning-rate schedules as pure functions of the step: constant, or linear warmup followed by a
// cosine or linear decay to a floor. Stateless, so resuming needs only the step count.
#pragma once

#include <nlohmann/json.hpp>
#include <cstdint>
#include <string>

namespace tessera::optim {

struct LrScheduleOptions {
  std::string type = "constant";  // "constant", "cosine" or "linear"
  double lr = 1e-3;               // the peak (base) learning rate
  int64_t warmup_steps = 0;
  int64_t total_steps = 0;  // cosine / linear: step at which the floor is reached
  double min_lr = 0.0;      // the floor
};

// lr_at(step), step = optimizer steps already taken (0 for the first update):
//   step < warmup_steps:          lr * (step + 1) / warmup_steps  (never 0, reaches lr at the end)
//   constant afterwards:          lr
//   cosine, warmup <= step < total: min_lr + (lr - min_lr) * (1 + cos(pi * f)) / 2
//   linear, warmup <= step < total: min_lr + (lr - min_lr) * (1 - f)
//                                 with f = (step - warmup_steps) / (total_steps - warmup_steps)
//   cosine / linear, step >= total: min_lr
class LrSchedule {
 public:
  explicit LrSchedule(const LrScheduleOptions& options);
  // {"type": "cosine", "warmup_steps": 100, "total_steps": 5000, "min_lr": 6e-5}; the peak lr is
  // `base_lr` (the optimizer's) unless the object has "lr". Unknown keys throw naming the key.
  static LrSchedule from_json(const nlohmann::json& j, double base_lr);
  nlohmann::json to_json() const;

  double lr_at(int64_t step) const;
  const LrScheduleOptions& options() const { return options_; }

 private:
  LrScheduleOptions options_;
};

}  // namespace tessera::optim

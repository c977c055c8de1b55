// Dynamic loss scaling for f16 training (torch.cuda.amp.GradScaler's rules): the loss is
// multiplied by the scale before backward; gradients are divided by it before the step; a step
// whose gradients hold inf or NaN is skipped and the scale multiplied by backoff_factor; after
// growth_interval clean steps in a row the scale grows by growth_factor.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/tensor.h"
#include "optim/optimizer.h"

namespace tessera::optim {

struct LossScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  double min_scale = 1.0;  // backoff never goes below this
};

// Combines this rank's found-inf flag with the other ranks' (a logical-or all-reduce), so every
// rank skips the same steps. Identity in one process.
using FoundInfReducer = std::function<bool(bool local_found_inf)>;

class DynamicLossScaler {
 public:
  explicit DynamicLossScaler(const LossScalerOptions& options = {});

  double scale() const { return scale_; }
  // loss * scale, differentiable (backward then yields scaled gradients).
  Tensor scale_loss(const Tensor& loss) const;

  // Divides the gradients of `params` by the scale in place and reports whether any of them holds
  // inf or NaN (after the reducer, if set). Call at most once per step, before clipping; step()
  // calls it when it has not been called.
  bool unscale(const std::vector<Tensor>& params);
  // Unscales optimizer.params() if unscale() has not run this step, then runs optimizer.step()
  // unless gradients were non-finite, and updates the scale. Returns true when the step ran, false
  // when it was skipped (counted in skipped_steps()).
  bool step(Optimizer& optimizer);

  int64_t skipped_steps() const { return skipped_; }
  // Clean steps since the last growth or backoff.
  int64_t growth_tracker() const { return growth_tracker_; }
  void set_found_inf_reducer(FoundInfReducer reducer) { reducer_ = std::move(reducer); }

  // {"scale", "growth_tracker", "skipped_steps"}: what a resumed run needs.
  nlohmann::json state_dict() const;
  void load_state_dict(const nlohmann::json& state);

 private:
  // Applies the growth / backoff rule after a step that found (or did not find) inf.
  void update(bool found_inf);

  LossScalerOptions options_;
  double scale_;
  int64_t growth_tracker_ = 0;
  int64_t skipped_ = 0;
  bool unscaled_ = false;  // unscale() ran for the current step
  bool found_inf_ = false;
  FoundInfReducer reducer_;
};

}  // namespace tessera::optim

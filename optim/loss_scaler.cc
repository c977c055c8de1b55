// Dynamic loss scaler: unscale with the inf/NaN check in one pass, skip or step, grow or back off.
#include "optim/loss_scaler.h"

#include <cmath>

#include "autograd/ops.h"
#include "optim/json_util.h"
#include "optim/param_math.h"

namespace tessera::optim {

using nlohmann::json;

DynamicLossScaler::DynamicLossScaler(const LossScalerOptions& o) : options_(o), scale_(o.init_scale) {
  const char* op = "loss_scaler";
  TS_CHECK(o.init_scale > 0.0 && std::isfinite(o.init_scale), op, "expected init_scale > 0, got ",
           o.init_scale);
  TS_CHECK(o.growth_factor >= 1.0, op, "expected growth_factor >= 1, got ", o.growth_factor);
  TS_CHECK(o.backoff_factor > 0.0 && o.backoff_factor < 1.0, op, "expected backoff_factor in (0, 1), got ",
           o.backoff_factor);
  TS_CHECK(o.growth_interval >= 1, op, "expected growth_interval >= 1, got ", o.growth_interval);
  TS_CHECK(o.min_scale > 0.0 && o.min_scale <= o.init_scale, op, "expected 0 < min_scale <= init_scale (",
           o.init_scale, "), got ", o.min_scale);
}

// A 16-bit loss is widened first: 2^16 times a loss of a few units overflows f16.
Tensor DynamicLossScaler::scale_loss(const Tensor& loss) const {
  return mul(loss.dtype() == DType::f32 ? loss : to_dtype(loss, DType::f32), scale_);
}

bool DynamicLossScaler::unscale(const std::vector<Tensor>& params) {
  TS_CHECK(!unscaled_, "loss_scaler", "expected one unscale() per step, got a second before step()");
  const double inv = 1.0 / scale_;
  bool finite = true;
  for (const Tensor& p : params) {
    const Tensor g = p.grad();
    if (g.defined()) finite &= detail::scale_inplace(g, inv);
  }
  found_inf_ = !finite;
  if (reducer_) found_inf_ = reducer_(found_inf_);
  unscaled_ = true;
  return found_inf_;
}

bool DynamicLossScaler::step(Optimizer& optimizer) {
  if (!unscaled_) unscale(optimizer.params());
  const bool found_inf = found_inf_;
  unscaled_ = false;
  found_inf_ = false;
  if (found_inf) {
    ++skipped_;
  } else {
    optimizer.step();
  }
  update(found_inf);
  return !found_inf;
}

void DynamicLossScaler::update(bool found_inf) {
  if (found_inf) {
    scale_ = std::max(scale_ * options_.backoff_factor, options_.min_scale);
    growth_tracker_ = 0;
  } else if (++growth_tracker_ >= options_.growth_interval) {
    scale_ *= options_.growth_factor;
    growth_tracker_ = 0;
  }
}

json DynamicLossScaler::state_dict() const {
  return {{"scale", scale_}, {"growth_tracker", growth_tracker_}, {"skipped_steps", skipped_}};
}

void DynamicLossScaler::load_state_dict(const json& j) {
  const char* where = "loss_scaler";
  detail::check_keys(j, {"scale", "growth_tracker", "skipped_steps"}, where);
  TS_CHECK(j.contains("scale") && j.contains("growth_tracker") && j.contains("skipped_steps"), where,
           "expected 'scale', 'growth_tracker' and 'skipped_steps', got ", j.dump());
  const double scale = detail::get_double(j, "scale", 0.0, where);
  const int64_t tracker = detail::get_int(j, "growth_tracker", 0, where);
  const int64_t skipped = detail::get_int(j, "skipped_steps", 0, where);
  TS_CHECK(scale > 0.0 && std::isfinite(scale), where, "expected scale > 0, got ", scale);
  TS_CHECK(tracker >= 0 && skipped >= 0, where, "expected growth_tracker and skipped_steps >= 0, got ",
           tracker, " and ", skipped);
  scale_ = scale;
  growth_tracker_ = tracker;
  skipped_ = skipped;
  unscaled_ = false;
  found_inf_ = false;
}

}  // namespace tessera::optim

// Adam / AdamW: option handling, and the updates handed to kernels::adam_update_multi (a whole
// group per call) and kernels::adam_update (a single parameter).
#include "optim/adam.h"

#include "kernels/kernels.h"
#include "optim/json_util.h"

namespace tessera::optim {

using nlohmann::json;

namespace {

template <typename O>
json adam_json(const O& o) {
  return {{"lr", o.lr}, {"betas", {o.beta1, o.beta2}}, {"eps", o.eps}, {"weight_decay", o.weight_decay}};
}

template <typename O>
void adam_from_json(const json& j, O* o, const char* where) {
  detail::check_keys(j, {"lr", "betas", "eps", "weight_decay"}, where);
  o->lr = detail::get_double(j, "lr", o->lr, where);
  detail::get_betas(j, o->beta1, o->beta2, where);
  o->eps = detail::get_double(j, "eps", o->eps, where);
  o->weight_decay = detail::get_double(j, "weight_decay", o->weight_decay, where);
}

template <typename O>
void adam_validate(const O& o, const char* where) {
  TS_CHECK(o.lr >= 0.0, where, "expected lr >= 0, got ", o.lr);
  TS_CHECK(o.beta1 >= 0.0 && o.beta1 < 1.0 && o.beta2 >= 0.0 && o.beta2 < 1.0, where,
           "expected betas in [0, 1), got (", o.beta1, ", ", o.beta2, ")");
  TS_CHECK(o.eps >= 0.0, where, "expected eps >= 0, got ", o.eps);
  TS_CHECK(o.weight_decay >= 0.0, where, "expected weight_decay >= 0, got ", o.weight_decay);
}

void check_contiguous(const Tensor& param, bool decoupled) {
  TS_CHECK(param.is_contiguous(), decoupled ? "adamw" : "adam", "expected a contiguous parameter, got ",
           param.describe(), " with strides ", shape_str(param.strides()));
}

template <typename O>
kernels::AdamStep step_of(const O& o, bool decoupled, int64_t step) {
  kernels::AdamStep s;
  s.lr = float(o.lr);
  s.beta1 = float(o.beta1);
  s.beta2 = float(o.beta2);
  s.eps = float(o.eps);
  s.weight_decay = float(o.weight_decay);
  s.decoupled = decoupled;
  s.step = step;
  return s;
}

// param (contiguous, any floating dtype; f32 normally), grad (contiguous, the param's shape).
template <typename O>
void adam_step(const O& o, bool decoupled, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
               const Tensor& exp_avg_sq, int64_t step) {
  check_contiguous(param, decoupled);
  kernels::adam_update(param, grad, exp_avg, exp_avg_sq, step_of(o, decoupled, step));
  param.bump_version();
}

// A group's parameters through kernels::adam_update_multi (one launch per dtype pairing on CUDA):
// parameters sharing a step count and a device go together (normally the whole group).
template <typename O, typename Pending>
void adam_group(const O& o, bool decoupled, std::span<const Pending> pending) {
  std::vector<bool> taken(pending.size(), false);
  std::vector<kernels::AdamTensors> batch;
  for (size_t i = 0; i < pending.size(); ++i) {
    if (taken[i]) continue;
    const int64_t step = pending[i].state->step;
    const Device device = pending[i].param.device();
    batch.clear();
    for (size_t j = i; j < pending.size(); ++j) {
      const Pending& u = pending[j];
      if (taken[j] || u.state->step != step || u.param.device() != device) continue;
      check_contiguous(u.param, decoupled);
      batch.push_back({u.param, u.grad, u.state->get("exp_avg"), u.state->get("exp_avg_sq")});
      taken[j] = true;
    }
    kernels::adam_update_multi(batch, step_of(o, decoupled, step));
  }
  for (const Pending& u : pending) u.param.bump_version();
}

}  // namespace

json to_json(const AdamOptions& o) { return adam_json(o); }
json to_json(const AdamWOptions& o) { return adam_json(o); }
void options_from_json(const json& j, AdamOptions* o) { adam_from_json(j, o, "adam"); }
void options_from_json(const json& j, AdamWOptions* o) { adam_from_json(j, o, "adamw"); }
void validate(const AdamOptions& o) { adam_validate(o, "adam"); }
void validate(const AdamWOptions& o) { adam_validate(o, "adamw"); }

Adam::Adam(const std::vector<ParamGroup>& groups, const AdamOptions& options)
    : OptimizerWithOptions(groups, options) {}
Adam::Adam(const std::vector<Tensor>& params, const AdamOptions& options)
    : Adam(std::vector<ParamGroup>{ParamGroup{.params = params}}, options) {}

void Adam::update(size_t group, const Tensor& param, const Tensor& grad, ParamState& state) {
  adam_step(options(group), false, param, grad, state.get("exp_avg"), state.get("exp_avg_sq"), state.step);
}

void Adam::update_group(size_t group, std::span<const PendingUpdate> pending) {
  adam_group(options(group), false, pending);
}

AdamW::AdamW(const std::vector<ParamGroup>& groups, const AdamWOptions& options)
    : OptimizerWithOptions(groups, options) {}
AdamW::AdamW(const std::vector<Tensor>& params, const AdamWOptions& options)
    : AdamW(std::vector<ParamGroup>{ParamGroup{.params = params}}, options) {}

void AdamW::update(size_t group, const Tensor& param, const Tensor& grad, ParamState& state) {
  adam_step(options(group), true, param, grad, state.get("exp_avg"), state.get("exp_avg_sq"), state.step);
}

void AdamW::update_group(size_t group, std::span<const PendingUpdate> pending) {
  adam_group(options(group), true, pending);
}

}  // namespace tessera::optim

// Adam / AdamW: option handling, and the update handed to kernels::adam_update.
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

// param (contiguous, any floating dtype; f32 normally), grad (contiguous, the param's shape).
template <typename O>
void adam_step(const O& o, bool decoupled, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
               const Tensor& exp_avg_sq, int64_t step) {
  TS_CHECK(param.is_contiguous(), decoupled ? "adamw" : "adam", "expected a contiguous parameter, got ",
           param.describe(), " with strides ", shape_str(param.strides()));
  kernels::AdamStep s;
  s.lr = float(o.lr);
  s.beta1 = float(o.beta1);
  s.beta2 = float(o.beta2);
  s.eps = float(o.eps);
  s.weight_decay = float(o.weight_decay);
  s.decoupled = decoupled;
  s.step = step;
  kernels::adam_update(param, grad, exp_avg, exp_avg_sq, s);
  param.bump_version();
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

AdamW::AdamW(const std::vector<ParamGroup>& groups, const AdamWOptions& options)
    : OptimizerWithOptions(groups, options) {}
AdamW::AdamW(const std::vector<Tensor>& params, const AdamWOptions& options)
    : AdamW(std::vector<ParamGroup>{ParamGroup{.params = params}}, options) {}

void AdamW::update(size_t group, const Tensor& param, const Tensor& grad, ParamState& state) {
  adam_step(options(group), true, param, grad, state.get("exp_avg"), state.get("exp_avg_sq"), state.step);
}

}  // namespace tessera::optim

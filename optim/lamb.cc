// LAMB's update: Adam moments in f32, the layer-wise trust ratio from double-precision norms.
#include "optim/lamb.h"

#include <cmath>

#include "core/factory.h"
#include "optim/json_util.h"
#include "optim/param_math.h"

namespace tessera::optim {

using nlohmann::json;

json to_json(const LambOptions& o) {
  return {{"lr", o.lr}, {"betas", {o.beta1, o.beta2}}, {"eps", o.eps}, {"weight_decay", o.weight_decay},
          {"bias_correction", o.bias_correction}};
}

void options_from_json(const json& j, LambOptions* o) {
  const char* where = "lamb";
  detail::check_keys(j, {"lr", "betas", "eps", "weight_decay", "bias_correction"}, where);
  o->lr = detail::get_double(j, "lr", o->lr, where);
  detail::get_betas(j, o->beta1, o->beta2, where);
  o->eps = detail::get_double(j, "eps", o->eps, where);
  o->weight_decay = detail::get_double(j, "weight_decay", o->weight_decay, where);
  o->bias_correction = detail::get_bool(j, "bias_correction", o->bias_correction, where);
}

void validate(const LambOptions& o) {
  TS_CHECK(o.lr >= 0.0, "lamb", "expected lr >= 0, got ", o.lr);
  TS_CHECK(o.beta1 >= 0.0 && o.beta1 < 1.0 && o.beta2 >= 0.0 && o.beta2 < 1.0, "lamb",
           "expected betas in [0, 1), got (", o.beta1, ", ", o.beta2, ")");
  TS_CHECK(o.eps >= 0.0, "lamb", "expected eps >= 0, got ", o.eps);
  TS_CHECK(o.weight_decay >= 0.0, "lamb", "expected weight_decay >= 0, got ", o.weight_decay);
}

Lamb::Lamb(const std::vector<ParamGroup>& groups, const LambOptions& options)
    : OptimizerWithOptions(groups, options) {}
Lamb::Lamb(const std::vector<Tensor>& params, const LambOptions& options)
    : Lamb(std::vector<ParamGroup>{ParamGroup{.params = params}}, options) {}

void Lamb::update(size_t group, const Tensor& param, const Tensor& grad, ParamState& state) {
  const LambOptions& o = options(group);
  detail::F32Work p(param, "lamb");
  const Tensor g32 = detail::as_f32_contiguous(grad);
  const float* g = g32.data<float>();
  float* w = p.data();
  float* m = state.get("exp_avg").data<float>();
  float* v = state.get("exp_avg_sq").data<float>();
  const int64_t n = p.numel();
  const double t = double(state.step);
  const float inv_bc1 = o.bias_correction ? float(1.0 / (1.0 - std::pow(o.beta1, t))) : 1.0f;
  const float inv_bc2 = o.bias_correction ? float(1.0 / (1.0 - std::pow(o.beta2, t))) : 1.0f;
  const float b1 = float(o.beta1), b2 = float(o.beta2);
  const float omb1 = float(1.0 - o.beta1), omb2 = float(1.0 - o.beta2);
  const float eps = float(o.eps), wd = float(o.weight_decay);
  const Tensor update = empty(param.shape());
  float* u = update.data<float>();
  detail::parallel_elements(n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      m[i] = b1 * m[i] + omb1 * g[i];
      v[i] = b2 * v[i] + omb2 * (g[i] * g[i]);
      u[i] = (m[i] * inv_bc1) / (std::sqrt(v[i] * inv_bc2) + eps) + wd * w[i];
    }
  });
  const double w_sq = detail::sum_squares(p.tensor()), u_sq = detail::sum_squares(update);
  const double trust = w_sq > 0.0 && u_sq > 0.0 ? std::sqrt(w_sq) / std::sqrt(u_sq) : 1.0;
  const float step = float(o.lr * trust);
  detail::parallel_elements(n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) w[i] -= step * u[i];
  });
  p.commit();
}

}  // namespace tessera::optim

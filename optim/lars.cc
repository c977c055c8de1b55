// LARS's update: decay, layer-wise trust ratio from double-precision norms, momentum, all in f32.
#include "optim/lars.h"

#include <cmath>

#include "core/factory.h"
#include "optim/json_util.h"
#include "optim/param_math.h"

namespace tessera::optim {

using nlohmann::json;

json to_json(const LarsOptions& o) {
  return {{"lr", o.lr},
          {"momentum", o.momentum},
          {"weight_decay", o.weight_decay},
          {"trust_coefficient", o.trust_coefficient},
          {"nesterov", o.nesterov},
          {"exclude_1d", o.exclude_1d}};
}

void options_from_json(const json& j, LarsOptions* o) {
  const char* where = "lars";
  detail::check_keys(j, {"lr", "momentum", "weight_decay", "trust_coefficient", "nesterov", "exclude_1d"},
                     where);
  o->lr = detail::get_double(j, "lr", o->lr, where);
  o->momentum = detail::get_double(j, "momentum", o->momentum, where);
  o->weight_decay = detail::get_double(j, "weight_decay", o->weight_decay, where);
  o->trust_coefficient = detail::get_double(j, "trust_coefficient", o->trust_coefficient, where);
  o->nesterov = detail::get_bool(j, "nesterov", o->nesterov, where);
  o->exclude_1d = detail::get_bool(j, "exclude_1d", o->exclude_1d, where);
}

void validate(const LarsOptions& o) {
  TS_CHECK(o.lr >= 0.0, "lars", "expected lr >= 0, got ", o.lr);
  TS_CHECK(o.momentum >= 0.0, "lars", "expected momentum >= 0, got ", o.momentum);
  TS_CHECK(o.weight_decay >= 0.0, "lars", "expected weight_decay >= 0, got ", o.weight_decay);
  TS_CHECK(o.trust_coefficient > 0.0, "lars", "expected trust_coefficient > 0, got ", o.trust_coefficient);
  TS_CHECK(!o.nesterov || o.momentum > 0.0, "lars", "expected momentum > 0 with nesterov, got ", o.momentum);
}

Lars::Lars(const std::vector<ParamGroup>& groups, const LarsOptions& options)
    : OptimizerWithOptions(groups, options) {}
Lars::Lars(const std::vector<Tensor>& params, const LarsOptions& options)
    : Lars(std::vector<ParamGroup>{ParamGroup{.params = params}}, options) {}

std::vector<std::string> Lars::state_names(size_t group) const {
  if (options(group).momentum != 0.0) return {"momentum_buffer"};
  return {};
}

void Lars::update(size_t group, const Tensor& param, const Tensor& grad, ParamState& state) {
  const LarsOptions& o = options(group);
  const bool adapt = !(o.exclude_1d && param.dim() <= 1);
  detail::F32Work p(param, "lars");
  const Tensor g32 = detail::as_f32_contiguous(grad);
  const float* g = g32.data<float>();
  float* w = p.data();
  const int64_t n = p.numel();
  const float wd = adapt ? float(o.weight_decay) : 0.0f;
  const Tensor decayed = empty(param.shape());
  float* d = decayed.data<float>();
  detail::parallel_elements(n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) d[i] = g[i] + wd * w[i];
  });
  float q = 1.0f;
  if (adapt) {
    const double w_sq = detail::sum_squares(p.tensor()), d_sq = detail::sum_squares(decayed);
    if (w_sq > 0.0 && d_sq > 0.0) q = float(o.trust_coefficient * std::sqrt(w_sq) / std::sqrt(d_sq));
  }
  const float lr = float(o.lr), mom = float(o.momentum);
  float* buf = o.momentum != 0.0 ? state.get("momentum_buffer").data<float>() : nullptr;
  const bool first = state.step == 1, nesterov = o.nesterov;
  detail::parallel_elements(n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float di = d[i] * q;
      float step = di;
      if (buf != nullptr) {
        buf[i] = first ? di : mom * buf[i] + di;
        step = nesterov ? di + mom * buf[i] : buf[i];
      }
      w[i] -= lr * step;
    }
  });
  p.commit();
}

}  // namespace tessera::optim

// SGD's update as f32 loops in PyTorch's order of operations.
#include "optim/sgd.h"

#include "optim/json_util.h"
#include "optim/param_math.h"

namespace tessera::optim {

using nlohmann::json;

json to_json(const SgdOptions& o) {
  return {{"lr", o.lr}, {"momentum", o.momentum}, {"dampening", o.dampening},
          {"weight_decay", o.weight_decay}, {"nesterov", o.nesterov}};
}

void options_from_json(const json& j, SgdOptions* o) {
  const char* where = "sgd";
  detail::check_keys(j, {"lr", "momentum", "dampening", "weight_decay", "nesterov"}, where);
  o->lr = detail::get_double(j, "lr", o->lr, where);
  o->momentum = detail::get_double(j, "momentum", o->momentum, where);
  o->dampening = detail::get_double(j, "dampening", o->dampening, where);
  o->weight_decay = detail::get_double(j, "weight_decay", o->weight_decay, where);
  o->nesterov = detail::get_bool(j, "nesterov", o->nesterov, where);
}

void validate(const SgdOptions& o) {
  TS_CHECK(o.lr >= 0.0, "sgd", "expected lr >= 0, got ", o.lr);
  TS_CHECK(o.momentum >= 0.0, "sgd", "expected momentum >= 0, got ", o.momentum);
  TS_CHECK(o.weight_decay >= 0.0, "sgd", "expected weight_decay >= 0, got ", o.weight_decay);
  TS_CHECK(!o.nesterov || (o.momentum > 0.0 && o.dampening == 0.0), "sgd",
           "expected momentum > 0 and dampening 0 with nesterov, got momentum ", o.momentum,
           " and dampening ", o.dampening);
}

SGD::SGD(const std::vector<ParamGroup>& groups, const SgdOptions& options)
    : OptimizerWithOptions(groups, options) {}

SGD::SGD(const std::vector<Tensor>& params, const SgdOptions& options)
    : SGD(std::vector<ParamGroup>{ParamGroup{.params = params}}, options) {}

std::vector<std::string> SGD::state_names(size_t group) const {
  if (options(group).momentum != 0.0) return {"momentum_buffer"};
  return {};
}

void SGD::update(size_t group, const Tensor& param, const Tensor& grad, ParamState& state) {
  const SgdOptions& o = options(group);
  detail::F32Work p(param, "sgd");
  const Tensor g32 = detail::as_f32_contiguous(grad);
  const float* g = g32.data<float>();
  float* w = p.data();
  const int64_t n = p.numel();
  const float wd = float(o.weight_decay), lr = float(o.lr), mom = float(o.momentum);
  const float keep = float(1.0 - o.dampening);
  float* buf = o.momentum != 0.0 ? state.get("momentum_buffer").data<float>() : nullptr;
  const bool first = state.step == 1;
  const bool nesterov = o.nesterov;
  detail::parallel_elements(n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float d = wd != 0.0f ? g[i] + wd * w[i] : g[i];
      if (buf != nullptr) {
        buf[i] = first ? d : mom * buf[i] + keep * d;
        d = nesterov ? d + mom * buf[i] : buf[i];
      }
      w[i] = w[i] - lr * d;
    }
  });
  p.commit();
}

}  // namespace tessera::optim

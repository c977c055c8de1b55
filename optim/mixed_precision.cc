// Master weights: f32 copies of low-precision parameters and the gradient / weight transfers.
#include "optim/mixed_precision.h"

#include "autograd/grad_mode.h"
#include "core/factory.h"

namespace tessera::optim {

MasterWeights::MasterWeights(const std::vector<Tensor>& model_params) : model_(model_params) {
  for (size_t i = 0; i < model_.size(); ++i) {
    const Tensor& p = model_[i];
    TS_CHECK(p.defined() && is_floating(p.dtype()), "master_weights", "expected floating parameters, got ",
             p.defined() ? p.describe() : "undefined", " at index ", i);
    if (p.dtype() == DType::f32) {
      masters_.push_back(p);
    } else {
      Tensor m = empty(p.shape(), {.dtype = DType::f32, .device = p.device()});
      m.copy_(p);
      m.set_requires_grad(true);
      masters_.push_back(m);
    }
  }
}

std::vector<ParamGroup> MasterWeights::master_groups(const std::vector<ParamGroup>& model_groups) const {
  std::vector<ParamGroup> out;
  for (const ParamGroup& g : model_groups) {
    ParamGroup m{.params = {}, .lr = g.lr, .weight_decay = g.weight_decay};
    for (const Tensor& p : g.params) {
      size_t k = 0;
      while (k < model_.size() && !model_[k].is_same(p)) ++k;
      TS_CHECK(k < model_.size(), "master_weights", "expected group parameters among the model's, got ",
               p.describe(), " that is not one of them");
      m.params.push_back(masters_[k]);
    }
    out.push_back(std::move(m));
  }
  return out;
}

void MasterWeights::grads_to_master() const {
  for (size_t i = 0; i < model_.size(); ++i) {
    if (masters_[i].is_same(model_[i])) continue;
    const Tensor g = model_[i].grad();
    if (!g.defined()) {
      masters_[i].set_grad(Tensor());
      continue;
    }
    Tensor mg = masters_[i].grad();
    if (!mg.defined()) {
      mg = empty(g.shape(), {.dtype = DType::f32, .device = g.device()});
      masters_[i].set_grad(mg);
    }
    mg.copy_(g);
  }
}

void MasterWeights::master_to_model() const {
  autograd::NoGradGuard no_grad;
  for (size_t i = 0; i < model_.size(); ++i)
    if (!masters_[i].is_same(model_[i])) model_[i].copy_(masters_[i]);
}

void MasterWeights::zero_grad() const {
  for (size_t i = 0; i < model_.size(); ++i) {
    model_[i].set_grad(Tensor());
    masters_[i].set_grad(Tensor());
  }
}

}  // namespace tessera::optim

// Gradient norms and global-norm clipping.
#include "optim/clip_grad.h"

#include <cmath>

#include "core/error.h"
#include "optim/param_math.h"

namespace tessera::optim {

double grad_sq_sum(const std::vector<Tensor>& params) {
  double total = 0.0;
  for (const Tensor& p : params) {
    const Tensor g = p.defined() ? p.grad() : Tensor();
    if (g.defined()) total += detail::sum_squares(g);
  }
  return total;
}

void scale_grads(const std::vector<Tensor>& params, double factor) {
  for (const Tensor& p : params) {
    const Tensor g = p.defined() ? p.grad() : Tensor();
    if (g.defined()) detail::scale_inplace(g, factor);
  }
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm, const SumReducer& reduce) {
  return clip_grad_norm(params, params, max_norm, reduce);
}

double clip_grad_norm(const std::vector<Tensor>& params, const std::vector<Tensor>& counted,
                      double max_norm, const SumReducer& reduce) {
  TS_CHECK(max_norm > 0.0, "clip_grad_norm", "expected max_norm > 0, got ", max_norm);
  double sq = grad_sq_sum(counted);
  if (reduce) sq = reduce(sq);
  const double norm = std::sqrt(sq);
  if (!std::isfinite(norm)) return norm;
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1.0) scale_grads(params, coef);
  return norm;
}

}  // namespace tessera::optim

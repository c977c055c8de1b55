// Global-norm gradient clipping (torch.nn.utils.clip_grad_norm_) and the pieces a parallel runtime
// reuses: the local sum of squares (to all-reduce across ranks) and an in-place gradient scale
// (also what averages gradients accumulated over micro-batches).
#pragma once

#include <functional>
#include <vector>

#include "core/tensor.h"

namespace tessera::optim {

// Sum over params with a defined grad of sum(grad^2), in double; deterministic for any thread count.
double grad_sq_sum(const std::vector<Tensor>& params);
// grad *= factor for every defined grad, in place (f32 math, rounded back for 16-bit grads).
void scale_grads(const std::vector<Tensor>& params, double factor);

// Sums a rank-local partial (of squares) across ranks; identity in one process.
using SumReducer = std::function<double(double local)>;

// The global 2-norm of all gradients, sqrt(reduce(grad_sq_sum(params))). When it is finite and
// max_norm / (norm + 1e-6) < 1 (PyTorch's rule), every grad is scaled by that coefficient.
// A non-finite norm is returned and nothing is scaled (the loss scaler or the caller decides what
// to do with the step). max_norm must be > 0.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm, const SumReducer& reduce = {});
// The same when ranks hold parameters in common (tensor parallelism): the norm is
// sqrt(reduce(grad_sq_sum(counted))), where `counted` are the parameters whose gradients this rank
// accounts for (its shards, and each replicated parameter on one rank of its group only), and every
// one of `params` is scaled.
double clip_grad_norm(const std::vector<Tensor>& params, const std::vector<Tensor>& counted,
                      double max_norm, const SumReducer& reduce);

}  // namespace tessera::optim

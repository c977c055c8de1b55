// Adam / AdamW's per-element update, shared by the CPU kernel and the CUDA kernel so both compute
// the same numbers. Step-wide constants are folded on the host into AdamCoeffs.
#pragma once

#include <math.h>

#include <cmath>
#include <cstdint>

#include "core/macros.h"

namespace tessera::kernels {

struct AdamCoeffs {
  float beta1, beta2;
  float one_minus_beta1, one_minus_beta2;
  float step_size;     // lr / (1 - beta1^step)
  float inv_sqrt_bc2;  // 1 / sqrt(1 - beta2^step)
  float eps;
  float param_scale;  // AdamW: 1 - lr * weight_decay (decoupled decay); Adam: 1
  float grad_decay;   // Adam: weight_decay (added to the gradient as wd * param); AdamW: 0
};

// Bias corrections in double: 1 - beta^step loses digits in f32 for small (1 - beta) and large
// steps.
inline AdamCoeffs adam_coeffs(float lr, float beta1, float beta2, float eps, float weight_decay,
                              bool decoupled, int64_t step) {
  const double bc1 = 1.0 - std::pow(double(beta1), double(step));
  const double bc2 = 1.0 - std::pow(double(beta2), double(step));
  AdamCoeffs c;
  c.beta1 = beta1;
  c.beta2 = beta2;
  c.one_minus_beta1 = float(1.0 - double(beta1));
  c.one_minus_beta2 = float(1.0 - double(beta2));
  c.step_size = float(double(lr) / bc1);
  c.inv_sqrt_bc2 = float(1.0 / std::sqrt(bc2));
  c.eps = eps;
  c.param_scale = decoupled ? float(1.0 - double(lr) * double(weight_decay)) : 1.0f;
  c.grad_decay = decoupled ? 0.0f : weight_decay;
  return c;
}

// One element, PyTorch's order of operations:
//   g += grad_decay * p;  p *= param_scale;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
//   p -= step_size * m / (sqrt(v) / sqrt(bc2) + eps)
// Every multiply-add is an explicit fmaf and nothing else can be contracted, so the CPU's vector
// path (which mirrors these steps), its scalar tail and the CUDA kernel agree bit for bit.
TS_HOST_DEVICE TS_INLINE void adam_element(float& p, float g, float& m, float& v,
                                           const AdamCoeffs& c) {
  g = ::fmaf(c.grad_decay, p, g);
  m = ::fmaf(c.beta1, m, c.one_minus_beta1 * g);
  v = ::fmaf(c.beta2, v, c.one_minus_beta2 * (g * g));
  const float denom = ::fmaf(::sqrtf(v), c.inv_sqrt_bc2, c.eps);
  const float update = (c.step_size * m) / denom;
  p = ::fmaf(p, c.param_scale, -update);
}

}  // namespace tessera::kernels

// Flat f32 access to parameters and gradients of any floating dtype, and element reductions in
// double whose result does not depend on the thread count (so resumed runs stay bit-identical).
#pragma once

#include <functional>

#include "core/tensor.h"

namespace tessera::optim::detail {

// Sum of squares of t's elements (any floating dtype and layout), accumulated in double over fixed
// blocks that are added in order. sum_squares, all_finite and scale_inplace also take tensors on a
// GPU: there they run as device ops in f32 and only the scalar result comes to the host.
double sum_squares(const Tensor& t);
// Whether every element of t is finite (no inf, no NaN).
bool all_finite(const Tensor& t);
// t *= factor in place, computed in f32 and rounded to nearest even for 16-bit dtypes. Returns
// whether every element was finite before scaling (one pass serves the loss scaler's check).
bool scale_inplace(const Tensor& t, double factor);

// fn(begin, end) over disjoint chunks of [0, n) on the CPU threads; for element-wise updates, whose
// results do not depend on the split.
void parallel_elements(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

// Throws naming `op` unless t lives on the CPU (the loop optimizers have no device kernels yet).
void check_cpu(const Tensor& t, const char* op);

// t as a contiguous f32 tensor: t itself when it already is one, else a converted copy.
Tensor as_f32_contiguous(const Tensor& t);

// A contiguous f32 working copy of a parameter for an update written as a loop over floats: the
// parameter's own memory when it is f32 and contiguous, else a converted copy. commit() stores the
// result back (rounding to nearest even for 16-bit parameters) and bumps the version counter, so
// graphs that saved the old values notice the change.
class F32Work {
 public:
  // op names the caller in errors (a parameter off the CPU).
  F32Work(const Tensor& param, const char* op);
  float* data() const { return work_.data<float>(); }
  int64_t numel() const { return work_.numel(); }
  const Tensor& tensor() const { return work_; }
  void commit() const;

 private:
  Tensor param_;
  Tensor work_;
};

}  // namespace tessera::optim::detail

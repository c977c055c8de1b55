// Element loops behind the optimizers, the clipper and the loss scaler.
#include "optim/param_math.h"

#include <cmath>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/dtype.h"
#include "core/parallel.h"

namespace tessera::optim::detail {

namespace {

constexpr int64_t kBlock = 16384;  // elements per partial sum; fixed so the sum's order is too

// fn(const T* x, int64_t n, int64_t block) per block of a contiguous copy of t, in parallel.
template <typename Fn>
void for_blocks(const Tensor& t, const char* op, Fn&& fn) {
  check_cpu(t, op);
  Tensor c = t.contiguous();
  const int64_t n = c.numel();
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  dispatch_floating(c.dtype(), op, [&]<typename T>() {
    const T* x = static_cast<const T*>(c.data_ptr());
    parallel_for(blocks, 4, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t begin = b * kBlock, len = std::min(kBlock, n - begin);
        fn(x + begin, len, b);
      }
    });
  });
}

// Off the CPU (gradients of a model on a GPU) the same reductions run as device ops in f32 and
// only the scalar result comes back to the host; the host loops above would read device memory.
double device_sum_squares(const Tensor& t) {
  autograd::NoGradGuard no_grad;
  return sum(square(t.to(DType::f32))).item();
}

// x * 0 is 0 for every finite x and NaN for inf and NaN, so the sum is finite iff every element is.
bool device_all_finite(const Tensor& t) {
  autograd::NoGradGuard no_grad;
  return std::isfinite(sum(mul(t.to(DType::f32), 0.0)).item());
}

}  // namespace

double sum_squares(const Tensor& t) {
  if (!t.device().is_cpu()) return device_sum_squares(t);
  std::vector<double> partial((t.numel() + kBlock - 1) / kBlock, 0.0);
  for_blocks(t, "sum_squares", [&]<typename T>(const T* x, int64_t n, int64_t b) {
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const double v = to_double(x[i]);
      s += v * v;
    }
    partial[b] = s;
  });
  double total = 0.0;
  for (double s : partial) total += s;
  return total;
}

bool all_finite(const Tensor& t) {
  if (!t.device().is_cpu()) return device_all_finite(t);
  std::vector<char> ok((t.numel() + kBlock - 1) / kBlock, 1);
  for_blocks(t, "all_finite", [&]<typename T>(const T* x, int64_t n, int64_t b) {
    bool fine = true;
    for (int64_t i = 0; i < n; ++i) fine &= std::isfinite(float(x[i]));
    ok[b] = fine;
  });
  for (char c : ok)
    if (!c) return false;
  return true;
}

bool scale_inplace(const Tensor& t, double factor) {
  if (!t.device().is_cpu()) {
    const bool finite = device_all_finite(t);
    autograd::NoGradGuard no_grad;
    t.copy_(mul(t.to(DType::f32), double(float(factor))));  // f32 math, rounded into t's dtype
    return finite;
  }
  Tensor c = t.contiguous();
  const int64_t n = c.numel();
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<char> ok(blocks, 1);
  const float f = float(factor);
  dispatch_floating(c.dtype(), "scale_inplace", [&]<typename T>() {
    T* x = static_cast<T*>(c.data_ptr());
    parallel_for(blocks, 4, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t begin = b * kBlock, end = std::min(n, begin + kBlock);
        bool fine = true;
        for (int64_t i = begin; i < end; ++i) {
          const float v = float(x[i]);
          fine &= std::isfinite(v);
          x[i] = T(v * f);
        }
        ok[b] = fine;
      }
    });
  });
  if (!c.is_same(t)) t.copy_(c);
  else t.bump_version();
  for (char o : ok)
    if (!o) return false;
  return true;
}

void parallel_elements(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  parallel_for(n, 32768, fn);
}

void check_cpu(const Tensor& t, const char* op) {
  TS_CHECK(t.device().is_cpu(), op, "expected a CPU tensor, got ", t.describe());
}

Tensor as_f32_contiguous(const Tensor& t) { return t.to(DType::f32).contiguous(); }

F32Work::F32Work(const Tensor& param, const char* op) : param_(param) {
  check_cpu(param, op);
  work_ = as_f32_contiguous(param);
}

void F32Work::commit() const {
  if (work_.is_same(param_)) {
    param_.bump_version();
  } else {
    param_.copy_(work_);
  }
}

}  // namespace tessera::optim::detail

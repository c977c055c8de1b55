// CUDA unary element-wise kernels and clamp, on the shared map launcher (map.cuh). The per-element
// math is kernels/math.h's, as on the CPU; 16-bit floats compute in f32 and round back through
// core/half.h. Integer negation wraps (two's complement), like the CPU kernels.
#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/elementwise_common.cuh"
#include "kernels/cuda/map.cuh"
#include "kernels/math.h"

namespace tessera::kernels::cuda {
namespace {

// Ops whose math is defined for floating dtypes only (the rest also take integers).
bool is_float_only(UnaryOp op) {
  switch (op) {
    case UnaryOp::neg:
    case UnaryOp::abs:
    case UnaryOp::square:
    case UnaryOp::sign:
    case UnaryOp::relu:
    case UnaryOp::logical_not: return false;
    default: return true;
  }
}

template <typename T>
struct UnaryFloat {
  UnaryOp op;
  __device__ __forceinline__ T operator()(T raw) const {
    const float x = float(raw);
    float r;
    switch (op) {
      case UnaryOp::neg: r = -x; break;
      case UnaryOp::abs: r = math::abs(x); break;
      case UnaryOp::exp: r = math::exp(x); break;
      case UnaryOp::log: r = ::logf(x); break;
      case UnaryOp::sqrt: r = ::sqrtf(x); break;
      case UnaryOp::rsqrt: r = 1.0f / ::sqrtf(x); break;
      case UnaryOp::tanh: r = math::tanh(x); break;
      case UnaryOp::sigmoid: r = math::sigmoid(x); break;
      // x < 0 rather than x > 0 so that NaN passes through, like the CPU (and PyTorch).
      case UnaryOp::relu: r = x < 0.0f ? 0.0f : x; break;
      case UnaryOp::gelu_tanh: r = math::gelu_tanh(x); break;
      case UnaryOp::gelu_erf: r = math::gelu_erf(x); break;
      case UnaryOp::silu: r = math::silu(x); break;
      case UnaryOp::sin: r = ::sinf(x); break;
      case UnaryOp::cos: r = ::cosf(x); break;
      case UnaryOp::reciprocal: r = 1.0f / x; break;
      case UnaryOp::square: r = x * x; break;
      case UnaryOp::sign: r = float(int(0.0f < x) - int(x < 0.0f)); break;  // NaN gives 0
      default: r = x; break;  // logical_not has its own functor; validated on the host
    }
    return T(r);
  }
};

template <typename T>
struct UnaryInt {
  UnaryOp op;
  __device__ __forceinline__ T operator()(T v) const {
    switch (op) {
      case UnaryOp::neg: return wrap_neg(v);
      case UnaryOp::abs: return v < T(0) ? wrap_neg(v) : v;
      case UnaryOp::square: return wrap_mul(v, v);
      case UnaryOp::sign: return T(int(T(0) < v) - int(v < T(0)));
      case UnaryOp::relu: return v < T(0) ? T(0) : v;
      default: return v;  // validated on the host
    }
  }
};

template <typename T>
struct LogicalNot {
  __device__ __forceinline__ bool operator()(T v) const { return !is_nonzero(v); }
};

// min(max(x, lo), hi) in this order (lo > hi gives hi, like PyTorch); NaN x stays NaN.
template <typename T, typename C>
struct Clamp {
  C lo, hi;
  __device__ __forceinline__ T operator()(T raw) const {
    const C v = C(raw);
    const C t = v < lo ? lo : v;
    return T(t > hi ? hi : t);
  }
};

// A double bound as an integer bound, saturating at T's range; `up` rounds up (lower bounds).
template <typename T>
T int_bound(double v, bool up) {
  const double r = up ? std::ceil(v) : std::floor(v);
  if (r <= double(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
  if (r >= double(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return T(r);
}

template <typename Out, typename T, typename Op>
void run_unary(Op op, const Tensor& x, const Tensor& out, const char* name) {
  Map1<Out, T, Op> m{op, static_cast<Out*>(out.data_ptr()), static_cast<const T*>(x.data_ptr())};
  launch_map(m, {&out, &x}, name);
}

}  // namespace

void unary(UnaryOp op, const Tensor& x, const Tensor& out) {
  const char* name = unary_op_name(op);
  check_cuda_tensors(name, {&x, &out});
  TS_CHECK(x.shape() == out.shape(), name, "expected input and output of one shape, got ",
           x.describe(), " and ", out.describe());
  const DType want = op == UnaryOp::logical_not ? DType::b8 : x.dtype();
  TS_CHECK(out.dtype() == want, name, "expected an output of dtype ", dtype_name(want), ", got ",
           out.describe());
  if (out.numel() == 0) return;
  dispatch_dtype(x.dtype(), [&]<typename T>() {
    if (op == UnaryOp::logical_not) return run_unary<bool, T>(LogicalNot<T>{}, x, out, name);
    if constexpr (kIsFloat<T>) {
      return run_unary<T, T>(UnaryFloat<T>{op}, x, out, name);
    } else if constexpr (kIsInt<T>) {
      if (!is_float_only(op)) return run_unary<T, T>(UnaryInt<T>{op}, x, out, name);
    }
    fail_dtype(name, is_float_only(op), x.dtype());
  });
}

void clamp(const Tensor& x, double lo, double hi, const Tensor& out) {
  check_cuda_tensors("clamp", {&x, &out});
  TS_CHECK(x.shape() == out.shape(), "clamp", "expected input and output of one shape, got ",
           x.describe(), " and ", out.describe());
  TS_CHECK(out.dtype() == x.dtype(), "clamp", "expected an output of dtype ", dtype_name(x.dtype()),
           ", got ", out.describe());
  if (out.numel() == 0) return;
  dispatch_dtype(x.dtype(), [&]<typename T>() {
    // A missing (NaN) bound becomes the type's extreme, so one branch-free kernel serves all cases.
    if constexpr (kIsInt<T>) {
      const T lo_c = std::isnan(lo) ? std::numeric_limits<T>::lowest() : int_bound<T>(lo, true);
      const T hi_c = std::isnan(hi) ? std::numeric_limits<T>::max() : int_bound<T>(hi, false);
      run_unary<T, T>(Clamp<T, T>{lo_c, hi_c}, x, out, "clamp");
    } else if constexpr (kIsFloat<T>) {
      const float lo_c = std::isnan(lo) ? -std::numeric_limits<float>::infinity() : float(lo);
      const float hi_c = std::isnan(hi) ? std::numeric_limits<float>::infinity() : float(hi);
      run_unary<T, T>(Clamp<T, float>{lo_c, hi_c}, x, out, "clamp");
    } else {
      fail_dtype("clamp", false, x.dtype());
    }
  });
}

}  // namespace tessera::kernels::cuda

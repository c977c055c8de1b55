// CPU unary element-wise kernels and clamp. 16-bit floats compute in f32 and round back; integer
// negation wraps (two's complement) instead of overflowing.
#include "kernels/cpu/elementwise.h"

#include <math.h>

#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/cpu/loops.h"
#include "kernels/math.h"

namespace tessera::kernels::cpu {
namespace {

template <typename C>
C negate(C v) {
  if constexpr (is_int_v<C>) {
    using U = std::make_unsigned_t<C>;
    return C(U(0) - U(v));
  } else {
    return -v;
  }
}

void check_same_shape(const char* op, const Tensor& x, const Tensor& out) {
  TS_CHECK(x.shape() == out.shape(), op, "expected input and output of one shape, got ", x.describe(),
           " and ", out.describe());
  TS_CHECK(x.device().is_cpu() && out.device().is_cpu(), op, "expected cpu tensors, got ",
           x.describe(), " and ", out.describe());
}

[[noreturn]] void fail_dtype(const char* op, bool floating_only, DType got) {
  const bool integer = got == DType::i32 || got == DType::i64;
  TS_FAIL(op, "expected ",
          floating_only ? "a floating dtype (f32, f16, bf16)" : "a numeric dtype (f32, f16, bf16, i32, i64)",
          ", got ", dtype_name(got),
          floating_only && integer ? " (the op layer promotes integers to f32 first)" : "");
}

// Ops defined for every numeric dtype (floats and integers).
template <typename T>
bool numeric_unary(UnaryOp op, const Tensor& x, const Tensor& out) {
  using C = compute_t<T>;
  switch (op) {
    case UnaryOp::neg: map1<T, T>(x, out, [](C v) { return negate(v); }); return true;
    case UnaryOp::abs: map1<T, T>(x, out, [](C v) { return v < C(0) ? negate(v) : v; }); return true;
    case UnaryOp::square: map1<T, T>(x, out, [](C v) { return C(v * v); }); return true;
    // NaN gives 0, like PyTorch.
    case UnaryOp::sign: map1<T, T>(x, out, [](C v) { return C(int(C(0) < v) - int(v < C(0))); }); return true;
    // v < 0 rather than v > 0 so that NaN passes through, like PyTorch.
    case UnaryOp::relu: map1<T, T>(x, out, [](C v) { return pick(v < C(0), C(0), v); }); return true;
    default: return false;
  }
}

template <typename T>
bool floating_unary(UnaryOp op, const Tensor& x, const Tensor& out) {
  switch (op) {
    case UnaryOp::abs: map1<T, T>(x, out, [](float v) { return math::abs(v); }); return true;
    case UnaryOp::exp: map1<T, T>(x, out, [](float v) { return math::exp(v); }); return true;
    case UnaryOp::log: map1<T, T>(x, out, [](float v) { return ::logf(v); }); return true;
    case UnaryOp::sqrt: map1<T, T>(x, out, [](float v) { return std::sqrt(v); }); return true;
    case UnaryOp::rsqrt: map1<T, T>(x, out, [](float v) { return 1.0f / std::sqrt(v); }); return true;
    case UnaryOp::tanh: map1<T, T>(x, out, [](float v) { return math::tanh(v); }); return true;
    case UnaryOp::sigmoid: map1<T, T>(x, out, [](float v) { return math::sigmoid(v); }); return true;
    case UnaryOp::gelu_tanh: map1<T, T>(x, out, [](float v) { return math::gelu_tanh(v); }); return true;
    case UnaryOp::gelu_erf: map1<T, T>(x, out, [](float v) { return math::gelu_erf(v); }); return true;
    case UnaryOp::silu: map1<T, T>(x, out, [](float v) { return math::silu(v); }); return true;
    case UnaryOp::sin: map1<T, T>(x, out, [](float v) { return ::sinf(v); }); return true;
    case UnaryOp::cos: map1<T, T>(x, out, [](float v) { return ::cosf(v); }); return true;
    case UnaryOp::reciprocal: map1<T, T>(x, out, [](float v) { return 1.0f / v; }); return true;
    default: return false;
  }
}

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

// A double bound as an integer bound, saturating at T's range; `up` rounds up (lower bounds).
template <typename T>
T int_bound(double v, bool up) {
  const double r = up ? std::ceil(v) : std::floor(v);
  if (r <= double(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
  if (r >= double(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return T(r);
}

}  // namespace

const char* unary_op_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::neg: return "neg";
    case UnaryOp::abs: return "abs";
    case UnaryOp::exp: return "exp";
    case UnaryOp::log: return "log";
    case UnaryOp::sqrt: return "sqrt";
    case UnaryOp::rsqrt: return "rsqrt";
    case UnaryOp::tanh: return "tanh";
    case UnaryOp::sigmoid: return "sigmoid";
    case UnaryOp::relu: return "relu";
    case UnaryOp::gelu_tanh: return "gelu_tanh";
    case UnaryOp::gelu_erf: return "gelu_erf";
    case UnaryOp::silu: return "silu";
    case UnaryOp::sin: return "sin";
    case UnaryOp::cos: return "cos";
    case UnaryOp::reciprocal: return "reciprocal";
    case UnaryOp::square: return "square";
    case UnaryOp::sign: return "sign";
    case UnaryOp::logical_not: return "logical_not";
  }
  return "unary";
}

void unary(UnaryOp op, const Tensor& x, const Tensor& out) {
  const char* name = unary_op_name(op);
  check_same_shape(name, x, out);
  const DType want = op == UnaryOp::logical_not ? DType::b8 : x.dtype();
  TS_CHECK(out.dtype() == want, name, "expected an output of dtype ", dtype_name(want), ", got ",
           out.describe());
  if (out.numel() == 0) return;
  dispatch_dtype(x.dtype(), [&]<typename T>() {
    if (op == UnaryOp::logical_not) {
      using C = compute_t<T>;
      return map1<T, bool>(x, out, [](C v) { return v == C(0); });
    }
    if constexpr (is_float_v<T>) {
      if (floating_unary<T>(op, x, out)) return;
    }
    if constexpr (is_float_v<T> || is_int_v<T>) {
      if (numeric_unary<T>(op, x, out)) return;
    }
    fail_dtype(name, is_float_only(op), x.dtype());
  });
}

void clamp(const Tensor& x, double lo, double hi, const Tensor& out) {
  check_same_shape("clamp", x, out);
  TS_CHECK(out.dtype() == x.dtype(), "clamp", "expected an output of dtype ", dtype_name(x.dtype()),
           ", got ", out.describe());
  if (out.numel() == 0) return;
  dispatch_dtype(x.dtype(), [&]<typename T>() {
    using C = compute_t<T>;
    if constexpr (is_float_v<T> || is_int_v<T>) {
      // A missing (NaN) bound becomes the type's extreme, so one branch-free loop serves all cases.
      C lo_c, hi_c;
      if constexpr (is_int_v<T>) {
        lo_c = std::isnan(lo) ? std::numeric_limits<T>::lowest() : int_bound<T>(lo, true);
        hi_c = std::isnan(hi) ? std::numeric_limits<T>::max() : int_bound<T>(hi, false);
      } else {
        lo_c = std::isnan(lo) ? -std::numeric_limits<float>::infinity() : float(lo);
        hi_c = std::isnan(hi) ? std::numeric_limits<float>::infinity() : float(hi);
      }
      // min(max(x, lo), hi) in this order (lo > hi gives hi, like PyTorch); NaN x stays NaN.
      map1<T, T>(x, out, [lo_c, hi_c](C v) {
        const C t = pick(v < lo_c, lo_c, v);
        return pick(t > hi_c, hi_c, t);
      });
    } else {
      fail_dtype("clamp", false, x.dtype());
    }
  });
}

}  // namespace tessera::kernels::cpu

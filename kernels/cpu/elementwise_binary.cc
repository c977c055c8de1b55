// CPU binary element-wise kernels (arithmetic, comparisons, logic, activation backward helpers)
// and where. Integer add/sub/mul wrap (two's complement) instead of overflowing.
#include <math.h>

#include <cmath>
#include <type_traits>

#include "kernels/arg_checks.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/loops.h"
#include "kernels/math.h"

namespace tessera::kernels::cpu {
namespace {

template <typename C>
C wrap_add(C a, C b) {
  if constexpr (is_int_v<C>) {
    using U = std::make_unsigned_t<C>;
    return C(U(a) + U(b));
  } else {
    return a + b;
  }
}

template <typename C>
C wrap_sub(C a, C b) {
  if constexpr (is_int_v<C>) {
    using U = std::make_unsigned_t<C>;
    return C(U(a) - U(b));
  } else {
    return a - b;
  }
}

template <typename C>
C wrap_mul(C a, C b) {
  if constexpr (is_int_v<C>) {
    using U = std::make_unsigned_t<C>;
    return C(U(a) * U(b));
  } else {
    return a * b;
  }
}

// Comparisons and logic: every dtype, bool out.
template <typename T>
void compare_binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  using C = compute_t<T>;
  switch (op) {
    case BinaryOp::eq:
      return map2<T, bool>(a, b, out, [](C x, C y) { return x == y; });
    case BinaryOp::ne:
      return map2<T, bool>(a, b, out, [](C x, C y) { return x != y; });
    case BinaryOp::lt:
      return map2<T, bool>(a, b, out, [](C x, C y) { return x < y; });
    case BinaryOp::le:
      return map2<T, bool>(a, b, out, [](C x, C y) { return x <= y; });
    case BinaryOp::gt:
      return map2<T, bool>(a, b, out, [](C x, C y) { return x > y; });
    case BinaryOp::ge:
      return map2<T, bool>(a, b, out, [](C x, C y) { return x >= y; });
    case BinaryOp::logical_and:
      return map2<T, bool>(a, b, out, [](C x, C y) { return x != C(0) && y != C(0); });
    case BinaryOp::logical_or:
      return map2<T, bool>(a, b, out, [](C x, C y) { return x != C(0) || y != C(0); });
    default:
      TS_ASSERT(false);
  }
}

// Arithmetic defined for floats and integers. maximum/minimum propagate NaN like PyTorch.
template <typename T>
void numeric_binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  using C = compute_t<T>;
  switch (op) {
    case BinaryOp::add:
      return map2<T, T>(a, b, out, [](C x, C y) { return wrap_add(x, y); });
    case BinaryOp::sub:
      return map2<T, T>(a, b, out, [](C x, C y) { return wrap_sub(x, y); });
    case BinaryOp::mul:
      return map2<T, T>(a, b, out, [](C x, C y) { return wrap_mul(x, y); });
    case BinaryOp::maximum:
      return map2<T, T>(a, b, out, [](C x, C y) { return pick((x > y) | (x != x), x, y); });
    case BinaryOp::minimum:
      return map2<T, T>(a, b, out, [](C x, C y) { return pick((x < y) | (x != x), x, y); });
    default:
      TS_ASSERT(false);
  }
}

// Floating-only ops; the backward helpers compute b * f'(a).
template <typename T>
void floating_binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  switch (op) {
    case BinaryOp::div:
      return map2<T, T>(a, b, out, [](float x, float y) { return x / y; });
    case BinaryOp::pow:
      return map2<T, T>(a, b, out, [](float x, float y) { return ::powf(x, y); });
    // x > 0 passes the gradient; like PyTorch's threshold_backward, x == 0 gives 0.
    case BinaryOp::relu_backward:
      return map2<T, T>(a, b, out, [](float x, float g) { return pick(x > 0.0f, g, 0.0f); });
    case BinaryOp::gelu_tanh_backward:
      return map2<T, T>(a, b, out, [](float x, float g) { return g * math::gelu_tanh_grad(x); });
    case BinaryOp::gelu_erf_backward:
      return map2<T, T>(a, b, out, [](float x, float g) { return g * math::gelu_erf_grad(x); });
    case BinaryOp::silu_backward:
      return map2<T, T>(a, b, out, [](float x, float g) { return g * math::silu_grad(x); });
    case BinaryOp::sigmoid_backward:
      return map2<T, T>(a, b, out, [](float y, float g) { return g * (y * (1.0f - y)); });
    case BinaryOp::tanh_backward:
      return map2<T, T>(a, b, out, [](float y, float g) { return g * (1.0f - y * y); });
    default:
      TS_ASSERT(false);
  }
}

}  // namespace

const char* binary_op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::add:
      return "add";
    case BinaryOp::sub:
      return "sub";
    case BinaryOp::mul:
      return "mul";
    case BinaryOp::div:
      return "div";
    case BinaryOp::pow:
      return "pow";
    case BinaryOp::maximum:
      return "maximum";
    case BinaryOp::minimum:
      return "minimum";
    case BinaryOp::eq:
      return "eq";
    case BinaryOp::ne:
      return "ne";
    case BinaryOp::lt:
      return "lt";
    case BinaryOp::le:
      return "le";
    case BinaryOp::gt:
      return "gt";
    case BinaryOp::ge:
      return "ge";
    case BinaryOp::logical_and:
      return "logical_and";
    case BinaryOp::logical_or:
      return "logical_or";
    case BinaryOp::relu_backward:
      return "relu_backward";
    case BinaryOp::gelu_tanh_backward:
      return "gelu_tanh_backward";
    case BinaryOp::gelu_erf_backward:
      return "gelu_erf_backward";
    case BinaryOp::silu_backward:
      return "silu_backward";
    case BinaryOp::sigmoid_backward:
      return "sigmoid_backward";
    case BinaryOp::tanh_backward:
      return "tanh_backward";
  }
  return "binary";
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  const char* name = binary_op_name(op);
  TS_CHECK(a.shape() == out.shape() && b.shape() == out.shape(), name,
           "expected operands broadcast to the output's shape, got ", a.describe(), ", ",
           b.describe(), " and ", out.describe());
  TS_CHECK(a.device().is_cpu() && b.device().is_cpu() && out.device().is_cpu(), name,
           "expected cpu tensors, got ", a.describe(), ", ", b.describe(), " and ", out.describe());
  TS_CHECK(a.dtype() == b.dtype(), name, "expected operands of one dtype, got ", a.describe(),
           " and ", b.describe());
  const bool to_bool = is_comparison_or_logic(op);
  const DType want = to_bool ? DType::b8 : a.dtype();
  TS_CHECK(out.dtype() == want, name, "expected an output of dtype ", dtype_name(want), ", got ",
           out.describe());
  if (out.numel() == 0) return;
  dispatch_dtype(a.dtype(), [&]<typename T>() {
    if (to_bool) return compare_binary<T>(op, a, b, out);
    if constexpr (is_float_v<T> || is_int_v<T>) {
      if (is_numeric_op(op)) return numeric_binary<T>(op, a, b, out);
    }
    if constexpr (is_float_v<T>) {
      return floating_binary<T>(op, a, b, out);
    } else {
      const bool numeric = is_numeric_op(op);
      TS_FAIL(name, "expected ",
              numeric ? "a numeric dtype (f32, f16, bf16, i32, i64)"
                      : "a floating dtype (f32, f16, bf16)",
              ", got ", dtype_name(a.dtype()),
              numeric ? "" : " (the op layer promotes integers to f32 first)");
    }
  });
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  TS_CHECK(cond.shape() == out.shape() && a.shape() == out.shape() && b.shape() == out.shape(),
           "where", "expected cond, a and b broadcast to the output's shape, got ", cond.describe(),
           ", ", a.describe(), ", ", b.describe(), " and ", out.describe());
  TS_CHECK(cond.dtype() == DType::b8, "where", "expected a bool condition, got ", cond.describe());
  TS_CHECK(a.dtype() == out.dtype() && b.dtype() == out.dtype(), "where",
           "expected a, b and out of one dtype, got ", a.describe(), ", ", b.describe(), " and ",
           out.describe());
  TS_CHECK(
      cond.device().is_cpu() && a.device().is_cpu() && b.device().is_cpu() && out.device().is_cpu(),
      "where", "expected cpu tensors, got ", cond.describe(), " and ", out.describe());
  if (out.numel() == 0) return;
  StridedLoop<4> loop(out.shape(), {out.strides(), cond.strides(), a.strides(), b.strides()});
  const auto rs = loop.row_strides();
  const bool* pc = static_cast<const bool*>(cond.data_ptr());
  dispatch_dtype(out.dtype(), [&]<typename T>() {
    T* po = static_cast<T*>(out.data_ptr());
    const T* pa = static_cast<const T*>(a.data_ptr());
    const T* pb = static_cast<const T*>(b.data_ptr());
    parallel_segments(loop, out.numel(),
                      [&](const std::array<int64_t, 4>& off, int64_t n, int64_t) {
                        T* o = po + off[0];
                        const bool* c = pc + off[1];
                        const T* x = pa + off[2];
                        const T* y = pb + off[3];
                        if (rs[0] == 1 && rs[1] == 1 && rs[2] == 1 && rs[3] == 1) {
#pragma omp simd
                          for (int64_t i = 0; i < n; ++i) o[i] = pick(c[i], x[i], y[i]);
                        } else {
                          for (int64_t i = 0; i < n; ++i)
                            o[i * rs[0]] = c[i * rs[1]] ? x[i * rs[2]] : y[i * rs[3]];
                        }
                      });
  });
}

}  // namespace tessera::kernels::cpu

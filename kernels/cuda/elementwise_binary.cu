// CUDA binary element-wise kernels (arithmetic, comparisons, logic, activation backward helpers)
// and where, on the shared map launcher (map.cuh). Broadcast operands arrive as stride-0 views and
// take the strided path. Same math and rounding as the CPU kernels (kernels/math.h, core/half.h).
#include <type_traits>

#include "kernels/arg_checks.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/elementwise_common.cuh"
#include "kernels/cuda/map.cuh"
#include "kernels/math.h"

namespace tessera::kernels::cuda {
namespace {

// The type comparisons run in: f32 for the 16-bit floats, the type itself otherwise.
template <typename T>
using compare_t = std::conditional_t<kIsHalf<T>, float, T>;

template <typename T>
struct Compare {
  BinaryOp op;
  __device__ __forceinline__ bool operator()(T a, T b) const {
    using C = compare_t<T>;
    const C x = C(a), y = C(b);
    switch (op) {
      case BinaryOp::eq:
        return x == y;
      case BinaryOp::ne:
        return x != y;
      case BinaryOp::lt:
        return x < y;
      case BinaryOp::le:
        return x <= y;
      case BinaryOp::gt:
        return x > y;
      case BinaryOp::ge:
        return x >= y;
      case BinaryOp::logical_and:
        return x != C(0) && y != C(0);
      case BinaryOp::logical_or:
        return x != C(0) || y != C(0);
      default:
        return false;  // validated on the host
    }
  }
};

// maximum/minimum propagate NaN like PyTorch; the backward helpers compute b * f'(a).
template <typename T>
struct BinaryFloat {
  BinaryOp op;
  __device__ __forceinline__ T operator()(T a, T b) const {
    const float x = float(a), y = float(b);
    float r;
    switch (op) {
      case BinaryOp::add:
        r = x + y;
        break;
      case BinaryOp::sub:
        r = x - y;
        break;
      case BinaryOp::mul:
        r = x * y;
        break;
      case BinaryOp::div:
        r = x / y;
        break;
      case BinaryOp::pow:
        r = ::powf(x, y);
        break;
      case BinaryOp::maximum:
        r = (x > y) || (x != x) ? x : y;
        break;
      case BinaryOp::minimum:
        r = (x < y) || (x != x) ? x : y;
        break;
      // x > 0 passes the gradient; like PyTorch's threshold_backward, x == 0 gives 0.
      case BinaryOp::relu_backward:
        r = x > 0.0f ? y : 0.0f;
        break;
      case BinaryOp::gelu_tanh_backward:
        r = y * math::gelu_tanh_grad(x);
        break;
      case BinaryOp::gelu_erf_backward:
        r = y * math::gelu_erf_grad(x);
        break;
      case BinaryOp::silu_backward:
        r = y * math::silu_grad(x);
        break;
      case BinaryOp::sigmoid_backward:
        r = y * (x * (1.0f - x));
        break;  // x = sigmoid output
      case BinaryOp::tanh_backward:
        r = y * (1.0f - x * x);
        break;  // x = tanh output
      default:
        r = 0.0f;
        break;  // validated on the host
    }
    return T(r);
  }
};

template <typename T>
struct BinaryInt {
  BinaryOp op;
  __device__ __forceinline__ T operator()(T x, T y) const {
    switch (op) {
      case BinaryOp::add:
        return wrap_add(x, y);
      case BinaryOp::sub:
        return wrap_sub(x, y);
      case BinaryOp::mul:
        return wrap_mul(x, y);
      case BinaryOp::maximum:
        return x > y ? x : y;
      case BinaryOp::minimum:
        return x < y ? x : y;
      default:
        return T(0);  // validated on the host
    }
  }
};

template <typename T>
struct Select {
  __device__ __forceinline__ T operator()(bool c, T a, T b) const { return c ? a : b; }
};

template <typename Out, typename T, typename Op>
void run_binary(Op op, const Tensor& a, const Tensor& b, const Tensor& out, const char* name) {
  Map2<Out, T, T, Op> m{op, static_cast<Out*>(out.data_ptr()), static_cast<const T*>(a.data_ptr()),
                        static_cast<const T*>(b.data_ptr())};
  launch_map(m, {&out, &a, &b}, name);
}

}  // namespace

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  const char* name = binary_op_name(op);
  check_cuda_tensors(name, {&a, &b, &out});
  TS_CHECK(a.shape() == out.shape() && b.shape() == out.shape(), name,
           "expected operands broadcast to the output's shape, got ", a.describe(), ", ",
           b.describe(), " and ", out.describe());
  TS_CHECK(a.dtype() == b.dtype(), name, "expected operands of one dtype, got ", a.describe(),
           " and ", b.describe());
  const bool to_bool = is_comparison_or_logic(op);
  const DType want = to_bool ? DType::b8 : a.dtype();
  TS_CHECK(out.dtype() == want, name, "expected an output of dtype ", dtype_name(want), ", got ",
           out.describe());
  if (out.numel() == 0) return;
  dispatch_dtype(a.dtype(), [&]<typename T>() {
    if (to_bool) return run_binary<bool, T>(Compare<T>{op}, a, b, out, name);
    if constexpr (kIsFloat<T>) {
      return run_binary<T, T>(BinaryFloat<T>{op}, a, b, out, name);
    } else if constexpr (kIsInt<T>) {
      if (is_numeric_op(op)) return run_binary<T, T>(BinaryInt<T>{op}, a, b, out, name);
    }
    fail_dtype(name, !is_numeric_op(op), a.dtype());
  });
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  check_cuda_tensors("where", {&cond, &a, &b, &out});
  TS_CHECK(cond.shape() == out.shape() && a.shape() == out.shape() && b.shape() == out.shape(),
           "where", "expected cond, a and b broadcast to the output's shape, got ", cond.describe(),
           ", ", a.describe(), ", ", b.describe(), " and ", out.describe());
  TS_CHECK(cond.dtype() == DType::b8, "where", "expected a bool condition, got ", cond.describe());
  TS_CHECK(a.dtype() == out.dtype() && b.dtype() == out.dtype(), "where",
           "expected a, b and out of one dtype, got ", a.describe(), ", ", b.describe(), " and ",
           out.describe());
  if (out.numel() == 0) return;
  dispatch_dtype(out.dtype(), [&]<typename T>() {
    Map3<T, bool, T, T, Select<T>> m{
        Select<T>{}, static_cast<T*>(out.data_ptr()), static_cast<const bool*>(cond.data_ptr()),
        static_cast<const T*>(a.data_ptr()), static_cast<const T*>(b.data_ptr())};
    launch_map(m, {&out, &cond, &a, &b}, "where");
  });
}

}  // namespace tessera::kernels::cuda

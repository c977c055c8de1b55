// Pieces shared by the CUDA element-wise files: wrapping integer arithmetic (two's complement, like
// the CPU kernels), truth of any element type, op names and the dtype error.
#pragma once

#include <type_traits>

#include "kernels/cuda/launch.cuh"
#include "kernels/kernels.h"

namespace tessera::kernels::cuda {

template <typename T>
__device__ __forceinline__ T wrap_neg(T v) {
  using U = std::make_unsigned_t<T>;
  return T(U(0) - U(v));
}
template <typename T>
__device__ __forceinline__ T wrap_add(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return T(U(a) + U(b));
}
template <typename T>
__device__ __forceinline__ T wrap_sub(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return T(U(a) - U(b));
}
template <typename T>
__device__ __forceinline__ T wrap_mul(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return T(U(a) * U(b));
}

template <typename T>
__device__ __forceinline__ bool is_nonzero(T v) {
  if constexpr (kIsHalf<T>) {
    return float(v) != 0.0f;
  } else {
    return v != T(0);
  }
}

inline const char* unary_op_name(UnaryOp op) {
  static constexpr const char* kNames[] = {
      "neg",     "abs",       "exp",      "log",  "sqrt", "rsqrt",      "tanh",   "sigmoid", "relu",
      "gelu_tanh", "gelu_erf", "silu",    "sin",  "cos",  "reciprocal", "square", "sign",    "logical_not"};
  const size_t i = size_t(op);
  return i < sizeof(kNames) / sizeof(kNames[0]) ? kNames[i] : "unary";
}

inline const char* binary_op_name(BinaryOp op) {
  static constexpr const char* kNames[] = {
      "add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge",
      "logical_and", "logical_or", "relu_backward", "gelu_tanh_backward", "gelu_erf_backward",
      "silu_backward", "sigmoid_backward", "tanh_backward"};
  const size_t i = size_t(op);
  return i < sizeof(kNames) / sizeof(kNames[0]) ? kNames[i] : "binary";
}

[[noreturn]] inline void fail_dtype(const char* op, bool floating_only, DType got) {
  const bool integer = got == DType::i32 || got == DType::i64;
  TS_FAIL(op, "expected ",
          floating_only ? "a floating dtype (f32, f16, bf16)" : "a numeric dtype (f32, f16, bf16, i32, i64)",
          ", got ", dtype_name(got),
          floating_only && integer ? " (the op layer promotes integers to f32 first)" : "");
}

}  // namespace tessera::kernels::cuda

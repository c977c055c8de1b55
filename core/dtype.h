// Element types, their sizes and names, type promotion and the dispatch helper that turns a
// run-time DType into a C++ type.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "core/error.h"
#include "core/half.h"

namespace tessera {

enum class DType : uint8_t { f32, f16, bf16, i32, i64, b8 };

// Inline: every tensor access reads it.
inline size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::b8: return 1;
  }
  return 0;
}
const char* dtype_name(DType t);
bool is_floating(DType t);
// The type both operands are converted to (PyTorch's lattice: bool < int32 < int64 < 16-bit float
// < f32; f16 with bf16 gives f32).
DType promote_types(DType a, DType b);

template <typename T>
struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::f32; };
template <> struct DTypeOf<Half> { static constexpr DType value = DType::f16; };
template <> struct DTypeOf<BFloat16> { static constexpr DType value = DType::bf16; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::i32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::i64; };
template <> struct DTypeOf<bool> { static constexpr DType value = DType::b8; };
template <typename T>
inline constexpr DType dtype_of = DTypeOf<T>::value;

// Any element type as double (16-bit floats through float).
template <typename T>
double to_double(T v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return double(float(v));
  } else {
    return double(v);
  }
}

// A double as any element type (16-bit floats round to nearest even through float).
template <typename T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return T(float(v));
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != 0.0;
  } else {
    return T(v);
  }
}

// Calls fn.template operator()<T>() with the C++ type of `t`:
//   dispatch_dtype(t, [&]<typename T>() { ... });
template <typename Fn>
decltype(auto) dispatch_dtype(DType t, Fn&& fn) {
  switch (t) {
    case DType::f32: return fn.template operator()<float>();
    case DType::f16: return fn.template operator()<Half>();
    case DType::bf16: return fn.template operator()<BFloat16>();
    case DType::i32: return fn.template operator()<int32_t>();
    case DType::i64: return fn.template operator()<int64_t>();
    case DType::b8: return fn.template operator()<bool>();
  }
  return fn.template operator()<float>();
}

// Floating types only (f32, f16, bf16); others throw a ValueError naming `op`.
template <typename Fn>
decltype(auto) dispatch_floating(DType t, const char* op, Fn&& fn) {
  switch (t) {
    case DType::f32: return fn.template operator()<float>();
    case DType::f16: return fn.template operator()<Half>();
    case DType::bf16: return fn.template operator()<BFloat16>();
    default: break;
  }
  TS_FAIL(op, "expected a floating dtype (f32, f16, bf16), got ", dtype_name(t));
}

}  // namespace tessera

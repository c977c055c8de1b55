// Row primitives shared by the CPU softmax, cross-entropy, layer-norm and attention kernels: a
// vectorisable f32 exp, max/sum/exp reductions over a row (AVX2 or AVX-512, chosen at run time),
// row loads/stores between 16-bit types and f32, and the contiguous-output plumbing they share.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/factory.h"
#include "core/half.h"
#include "core/tensor.h"
#include "kernels/cpu/cpu_features.h"

namespace tessera::kernels::cpu::detail {

namespace exp_const {
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2Hi = 0.693359375f;
inline constexpr float kLn2Lo = -2.12194440e-4f;
// Clamps: at -88, 2^n rounds to 2^-127, whose exponent field is 0, so the scale and the result
// are exactly 0; at 88.72 (f32's overflow) to 2^128, whose field is 255: +inf.
inline constexpr float kMin = -88.0f, kMax = 88.72283f;
inline constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
inline constexpr float kP[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
}  // namespace exp_const

// exp(x) in f32 without a libm call (GCC leaves scalar code with clamps unvectorised under
// -ftrapping-math, and glibc's expf is scalar without -ffast-math); exp_lanes below does the same
// steps on vectors. Range reduction x = n*ln2 + r with |r| <= ln2/2, then a degree-6 polynomial
// for exp(r) (relative error about 1e-7) times 2^n, built in the exponent bits: t = x*log2(e) +
// 1.5*2^23 holds n in its low mantissa bits, so (bits(t) + 127) << 23 is 2^n's bit pattern
// (bits(1.5*2^23) << 23 wraps to 0). The clamps to [kMin, kMax] keep n in [-127, 128], where that
// pattern runs from 0 to +inf: exp(x <= -87.68) = 0 (masked scores, exp(-inf)), exp(x >= 88.38)
// = +inf (0.35 before f32's own overflow), NaN stays NaN (each clamp keeps its unordered
// operand); results between -87.68 and -87.34 are subnormal. Every caller passes x - max or
// x - log-sum-exp, about 0 or below. About half the operations of a version with separate
// underflow, overflow and NaN selects: softmax rows, whose cost is their exps, ran 1.1-1.25x
// faster.
inline float exp_approx(float x) {
  using namespace exp_const;
  float xc = x < kMin ? kMin : x;
  xc = xc > kMax ? kMax : xc;
  const float t = xc * kLog2e + kRound;
  const float n = t - kRound;
  float r = xc - n * kLn2Hi;
  r = r - n * kLn2Lo;
  float p = kP[0];
  for (int k = 1; k < 6; ++k) p = p * r + kP[k];
  p = p * (r * r) + (r + 1.0f);
  return p * std::bit_cast<float>((std::bit_cast<uint32_t>(t) + 127u) << 23);
}

// f32 vectors one register wide for an ISA tag of with_isa (8 lanes for AVX2, 16 for AVX-512), as
// GCC vector extensions: the explicit-SIMD row code below is written once and with_isa compiles
// it for either width. Outside a with_isa body a 16-lane vector is lowered to two AVX2 halves.
template <int kLanes>
struct F32Lanes;
template <>
struct F32Lanes<8> {
  typedef float type __attribute__((vector_size(32)));
};
template <>
struct F32Lanes<16> {
  typedef float type __attribute__((vector_size(64)));
};
template <typename Isa>
using f32v = typename F32Lanes<Isa::kFloatLanes>::type;

// Vectors pass between functions by reference only: GCC passes 64-byte vectors by value
// differently in AVX-512 and AVX2 functions (-Wpsabi), and references sidestep that.
#define TS_LANES_INLINE inline __attribute__((always_inline))

// x - 0 is x for every x, -0 and NaN included, so this is an exact broadcast.
template <typename V>
TS_LANES_INLINE void splat(V& v, float x) {
  v = x - V{};
}
template <typename V>
TS_LANES_INLINE void load_lanes(V& v, const float* p) {
  std::memcpy(&v, p, sizeof(V));
}
template <typename V>
TS_LANES_INLINE void store_lanes(float* p, const V& v) {
  std::memcpy(p, &v, sizeof(V));
}

// x = exp_approx(x) on every lane, the same operations in the same order.
template <typename V>
TS_LANES_INLINE void exp_lanes(V& x) {
  using namespace exp_const;
  typedef uint32_t U __attribute__((vector_size(sizeof(V))));
  V lo, hi, p;
  splat(lo, kMin);
  splat(hi, kMax);
  V xc = x < lo ? lo : x;
  xc = xc > hi ? hi : xc;
  const V t = xc * kLog2e + kRound;
  const V n = t - kRound;
  V r = xc - n * kLn2Hi;
  r = r - n * kLn2Lo;
  splat(p, kP[0]);
  for (int k = 1; k < 6; ++k) p = p * r + kP[k];
  p = p * (r * r) + (r + 1.0f);
  x = p * V((U(t) + 127u) << 23);
}

// Sum of the lanes, halving the vector each step (AVX2's usual 128-bit fold order).
template <typename V>
TS_LANES_INLINE float hsum_lanes(const V& v) {
  constexpr int kLanes = int(sizeof(V) / sizeof(float));
  float a[kLanes];
  std::memcpy(a, &v, sizeof(V));
  for (int w = kLanes / 2; w >= 1; w /= 2) {
    for (int k = 0; k < w; ++k) a[k] += a[k + w];
  }
  return a[0];
}

// Every row helper comes in two forms: f(isa, ...) for callers already inside a with_isa body
// (the isa tag sets the vector width; the caller's with_isa sets the instruction set), and f(...)
// which dispatches by itself.

template <typename Isa>
inline float row_max(Isa, const float* x, int64_t n) {
  // Explicit lanes: an omp simd max reduction filled and folded a private array on every call,
  // which short rows (attention's 192 keys, softmax's 256) paid for.
  using V = f32v<Isa>;
  constexpr int64_t kLanes = Isa::kFloatLanes;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  V m, v;
  splat(m, kNegInf);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    load_lanes(v, x + i);
    m = v > m ? v : m;  // a NaN never compares greater, as in the scalar tail
  }
  float lanes[kLanes];
  std::memcpy(lanes, &m, sizeof(V));
  float r = kNegInf;
  for (int64_t k = 0; k < kLanes; ++k) r = lanes[k] > r ? lanes[k] : r;
  for (; i < n; ++i) r = x[i] > r ? x[i] : r;
  return r;
}

// Long rows (50257 classes) are summed in blocks: f32 lane sums within a block, the block sums in
// double, so the error stays that of a 512-element sum.
inline constexpr int64_t kSumBlock = 512;

template <typename Isa>
inline float row_sum(Isa, const float* x, int64_t n) {
  double total = 0.0;
  for (int64_t b = 0; b < n; b += kSumBlock) {
    const int64_t end = n - b < kSumBlock ? n : b + kSumBlock;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t i = b; i < end; ++i) s += x[i];
    total += s;
  }
  return float(total);
}

// sum of exp(x[i] - shift) over one block (n <= kSumBlock), stored into out when non-null.
template <typename Isa>
inline float exp_sum_block(Isa, const float* x, float shift, float* out, int64_t n) {
  using V = f32v<Isa>;
  constexpr int64_t kLanes = Isa::kFloatLanes;
  V vs, acc = {}, e;
  splat(vs, shift);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    load_lanes(e, x + i);
    e -= vs;
    exp_lanes(e);
    if (out) store_lanes(out + i, e);
    acc += e;
  }
  float s = hsum_lanes(acc);
  for (; i < n; ++i) {
    const float e = exp_approx(x[i] - shift);
    if (out) out[i] = e;
    s += e;
  }
  return s;
}

// out[i] = exp(x[i] - shift) when out is non-null; returns sum_i exp(x[i] - shift). out may
// alias x.
template <typename Isa>
inline float row_exp_store(Isa isa, const float* x, float shift, float* out, int64_t n) {
  double total = 0.0;
  for (int64_t b = 0; b < n; b += kSumBlock) {
    const int64_t len = n - b < kSumBlock ? n - b : kSumBlock;
    total += exp_sum_block(isa, x + b, shift, out ? out + b : nullptr, len);
  }
  return float(total);
}

// sum_i exp(x[i] - shift), nothing stored.
template <typename Isa>
inline float row_exp_sum(Isa isa, const float* x, float shift, int64_t n) {
  return row_exp_store(isa, x, shift, nullptr, n);
}

// out[i] = exp(x[i] - shift) * scale + add, nothing summed (softmax from a known log-sum-exp, and
// the cross-entropy gradient's smoothing term).
template <typename Isa>
inline void row_exp_scale_add(Isa, const float* x, float shift, float scale, float add, float* out,
                              int64_t n) {
  using V = f32v<Isa>;
  constexpr int64_t kLanes = Isa::kFloatLanes;
  V vs, vscale, vadd, e;
  splat(vs, shift);
  splat(vscale, scale);
  splat(vadd, add);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    load_lanes(e, x + i);
    e -= vs;
    exp_lanes(e);
    store_lanes(out + i, V(e * vscale + vadd));
  }
  for (; i < n; ++i) out[i] = exp_approx(x[i] - shift) * scale + add;
}

// out[i] = g[i] - exp(y[i]) * scale (log-softmax and cross-entropy backwards). out may alias g or
// y.
template <typename Isa>
inline void row_sub_exp_scale(Isa, const float* g, const float* y, float scale, float* out,
                              int64_t n) {
  using V = f32v<Isa>;
  constexpr int64_t kLanes = Isa::kFloatLanes;
  V vscale, e, gv;
  splat(vscale, scale);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    load_lanes(e, y + i);
    load_lanes(gv, g + i);
    exp_lanes(e);
    store_lanes(out + i, V(gv - e * vscale));
  }
  for (; i < n; ++i) out[i] = g[i] - exp_approx(y[i]) * scale;
}

// row[i] = exp(row[i] - sub[i]) (attention backward's probabilities from saved log-sum-exps).
template <typename Isa>
inline void row_exp_sub(Isa, float* row, const float* sub, int64_t n) {
  using V = f32v<Isa>;
  constexpr int64_t kLanes = Isa::kFloatLanes;
  V e, s;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    load_lanes(e, row + i);
    load_lanes(s, sub + i);
    e -= s;
    exp_lanes(e);
    store_lanes(row + i, e);
  }
  for (; i < n; ++i) row[i] = exp_approx(row[i] - sub[i]);
}

// sum_i x[i] * y[i], in two vector accumulators (the products of a short row are one dependent
// chain otherwise).
template <typename Isa>
inline float row_dot(Isa, const float* x, const float* y, int64_t n) {
  using V = f32v<Isa>;
  constexpr int64_t kLanes = Isa::kFloatLanes;
  V acc0 = {}, acc1 = {}, a, b, c, d;
  int64_t i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    load_lanes(a, x + i);
    load_lanes(b, y + i);
    load_lanes(c, x + i + kLanes);
    load_lanes(d, y + i + kLanes);
    acc0 += a * b;
    acc1 += c * d;
  }
  for (; i + kLanes <= n; i += kLanes) {
    load_lanes(a, x + i);
    load_lanes(b, y + i);
    acc0 += a * b;
  }
  acc0 += acc1;
  float s = hsum_lanes(acc0);
  for (; i < n; ++i) s += x[i] * y[i];
  return s;
}

// out[i] = y[i] * (g[i] - sub) (softmax backward). out may alias y or g.
template <typename Isa>
inline void row_mul_sub(Isa, const float* y, const float* g, float sub, float* out, int64_t n) {
  using V = f32v<Isa>;
  constexpr int64_t kLanes = Isa::kFloatLanes;
  V vs, a, b;
  splat(vs, sub);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    load_lanes(a, y + i);
    load_lanes(b, g + i);
    store_lanes(out + i, V(a * (b - vs)));
  }
  for (; i < n; ++i) out[i] = y[i] * (g[i] - sub);
}

#undef TS_LANES_INLINE

inline float row_max(const float* x, int64_t n) {
  return with_isa([&](auto isa) { return row_max(isa, x, n); });
}
inline float row_sum(const float* x, int64_t n) {
  return with_isa([&](auto isa) { return row_sum(isa, x, n); });
}
inline float row_exp_sum(const float* x, float shift, int64_t n) {
  return with_isa([&](auto isa) { return row_exp_sum(isa, x, shift, n); });
}
inline float row_exp_store(const float* x, float shift, float* out, int64_t n) {
  return with_isa([&](auto isa) { return row_exp_store(isa, x, shift, out, n); });
}
inline void row_exp_scale_add(const float* x, float shift, float scale, float add, float* out,
                              int64_t n) {
  with_isa([&](auto isa) { row_exp_scale_add(isa, x, shift, scale, add, out, n); });
}
inline void row_sub_exp_scale(const float* g, const float* y, float scale, float* out, int64_t n) {
  with_isa([&](auto isa) { row_sub_exp_scale(isa, g, y, scale, out, n); });
}
inline void row_exp_sub(float* row, const float* sub, int64_t n) {
  with_isa([&](auto isa) { row_exp_sub(isa, row, sub, n); });
}

template <typename T>
inline constexpr bool kIsF32 = std::is_same_v<T, float>;

// dst[i] = float(src[i * stride]).
template <typename T>
inline void load_row(const T* src, int64_t stride, float* dst, int64_t n) {
  if (stride == 1) {
    for (int64_t i = 0; i < n; ++i) dst[i] = float(src[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = float(src[i * stride]);
  }
}

// dst[i * stride] = T(src[i]) (round to nearest even for 16-bit types).
template <typename T>
inline void store_row(const float* src, T* dst, int64_t stride, int64_t n) {
  if (stride == 1) {
    for (int64_t i = 0; i < n; ++i) dst[i] = T(src[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i * stride] = T(src[i]);
  }
}

// A row of a T tensor as contiguous f32: the row itself when it already is one, else a copy into
// `scratch` (sized by the caller's thread).
template <typename T>
inline const float* row_as_f32(const T* src, int64_t stride, int64_t n,
                               std::vector<float>& scratch) {
  if constexpr (kIsF32<T>) {
    if (stride == 1) return src;
  }
  scratch.resize(size_t(n));
  load_row(src, stride, scratch.data(), n);
  return scratch.data();
}

// Rows per parallel chunk so that a chunk holds at least ~16K elements (thread start-up is ~us).
inline int64_t row_grain(int64_t cols) {
  constexpr int64_t kChunkElems = 16384;
  return cols >= kChunkElems ? 1 : kChunkElems / (cols > 0 ? cols : 1);
}

// Product of all dims but the last (1 for a scalar): the number of rows a last-dim kernel sees.
inline int64_t leading_rows(const Tensor& t) {
  return t.dim() == 0 ? 1 : t.numel() / (t.shape().back() > 0 ? t.shape().back() : 1);
}
inline int64_t last_dim(const Tensor& t) { return t.dim() == 0 ? 1 : t.shape().back(); }

// A contiguous tensor a kernel can write `out`'s values into: `out` itself when it is contiguous,
// else a scratch (holding out's values when `keep_values`) that finish_output copies back.
inline Tensor contiguous_output(const Tensor& out, bool keep_values = false) {
  if (out.is_contiguous()) return out;
  if (keep_values) return out.clone();
  return empty(out.shape(), {.dtype = out.dtype(), .device = out.device()});
}
inline void finish_output(const Tensor& written, const Tensor& out) {
  if (!written.is_same(out)) out.copy_(written);
}

}  // namespace tessera::kernels::cpu::detail

// Loop skeletons for the CPU element-wise kernels: walk operands of any strides as row segments,
// threaded over flat element ranges (a long contiguous row is split across threads), with a tight
// `omp simd` inner loop on contiguous rows (compiled for AVX-512 and AVX2 for f32, chosen at run
// time).
#pragma once

#include <array>
#include <cstdint>
#include <type_traits>

#include "core/half.h"
#include "core/parallel.h"
#include "core/strided_loop.h"
#include "core/tensor.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/math.h"

namespace tessera::kernels::cpu {

// On a row-segment body: inline every call in it (the per-element op), so its loops vectorise
// even when the op is too large for the inliner's own judgement.
#define TS_FLATTEN __attribute__((flatten))

// Elements per parallel chunk.
inline constexpr int64_t kGrain = 32768;

template <typename T>
inline constexpr bool is_half_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
template <typename T>
inline constexpr bool is_float_v = std::is_same_v<T, float> || is_half_v<T>;
template <typename T>
inline constexpr bool is_int_v = std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>;

// The type arithmetic runs in: f32 for the 16-bit floats, the type itself otherwise.
template <typename T>
using compute_t = std::conditional_t<is_half_v<T>, float, T>;

// c ? a : b; for floats a bit blend that keeps the loop vectorisable (see math::select).
template <typename C>
inline C pick(bool c, C a, C b) {
  if constexpr (std::is_same_v<C, float>) {
    return math::select(c, a, b);
  } else {
    return c ? a : b;
  }
}

// Runs body(isa), a contiguous row loop: under with_isa for f32 inputs (the hot path gets an
// AVX-512 copy chosen at run time), at the baseline for 16-bit and integer types, whose loops are
// not worth a second copy.
template <typename In, typename Body>
inline void contiguous_loop(Body&& body) {
  if constexpr (std::is_same_v<In, float>) {
    with_isa(body);
  } else {
    body(IsaAvx2{});
  }
}

// fn(offsets, len, flat) for the row pieces covering flat elements [begin, end) of `loop`'s index
// space; offsets are each operand's element offset at the piece's first element, flat its index.
template <size_t N, typename Fn>
void for_segments(const StridedLoop<N>& loop, int64_t begin, int64_t end, Fn&& fn) {
  if (begin >= end) return;
  const int64_t len = loop.row_size();
  const auto rs = loop.row_strides();
  const int64_t row0 = begin / len, row1 = (end - 1) / len + 1;
  int64_t flat = row0 * len;
  loop.for_rows(row0, row1, [&](std::array<int64_t, N> off) {
    const int64_t s = begin > flat ? begin - flat : 0;
    const int64_t e = end < flat + len ? end - flat : len;
    for (size_t k = 0; k < N; ++k) off[k] += s * rs[k];
    fn(off, e - s, flat + s);
    flat += len;
  });
}

// Threads over all elements of `loop` in chunks of about kGrain.
template <size_t N, typename Fn>
void parallel_segments(const StridedLoop<N>& loop, int64_t numel, Fn&& fn) {
  parallel_for(numel, kGrain, [&](int64_t b, int64_t e) { for_segments(loop, b, e, fn); });
}

// out = f(x) element-wise; f takes and returns compute types, results are converted to Out.
template <typename In, typename Out, typename F>
void map1(const Tensor& x, const Tensor& out, F f) {
  using C = compute_t<In>;
  StridedLoop<2> loop(out.shape(), {out.strides(), x.strides()});
  const auto rs = loop.row_strides();
  Out* po = static_cast<Out*>(out.data_ptr());
  const In* px = static_cast<const In*>(x.data_ptr());
  auto segment = [&](const std::array<int64_t, 2>& off, int64_t n, int64_t) TS_FLATTEN {
    Out* o = po + off[0];
    const In* a = px + off[1];
    if (rs[0] == 1 && rs[1] == 1) {
      contiguous_loop<In>([&](auto) {
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) o[i] = Out(f(C(a[i])));
      });
    } else {
      for (int64_t i = 0; i < n; ++i) o[i * rs[0]] = Out(f(C(a[i * rs[1]])));
    }
  };
  parallel_segments(loop, out.numel(), segment);
}

// out = f(a, b) element-wise. Contiguous rows and rows where one operand is a broadcast scalar
// (stride 0, e.g. a bias or a scalar operand) get their own tight loops.
template <typename In, typename Out, typename F>
void map2(const Tensor& a, const Tensor& b, const Tensor& out, F f) {
  using C = compute_t<In>;
  StridedLoop<3> loop(out.shape(), {out.strides(), a.strides(), b.strides()});
  const auto rs = loop.row_strides();
  Out* po = static_cast<Out*>(out.data_ptr());
  const In* pa = static_cast<const In*>(a.data_ptr());
  const In* pb = static_cast<const In*>(b.data_ptr());
  auto segment = [&](const std::array<int64_t, 3>& off, int64_t n, int64_t) TS_FLATTEN {
    Out* o = po + off[0];
    const In* x = pa + off[1];
    const In* y = pb + off[2];
    if (rs[0] == 1 && rs[1] == 1 && rs[2] == 1) {
      contiguous_loop<In>([&](auto) {
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) o[i] = Out(f(C(x[i]), C(y[i])));
      });
    } else if (rs[0] == 1 && rs[1] == 1 && rs[2] == 0) {
      const C yv = C(y[0]);
      contiguous_loop<In>([&](auto) {
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) o[i] = Out(f(C(x[i]), yv));
      });
    } else if (rs[0] == 1 && rs[1] == 0 && rs[2] == 1) {
      const C xv = C(x[0]);
      contiguous_loop<In>([&](auto) {
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) o[i] = Out(f(xv, C(y[i])));
      });
    } else {
      for (int64_t i = 0; i < n; ++i) o[i * rs[0]] = Out(f(C(x[i * rs[1]]), C(y[i * rs[2]])));
    }
  };
  parallel_segments(loop, out.numel(), segment);
}

}  // namespace tessera::kernels::cpu

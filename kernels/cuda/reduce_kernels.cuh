// Device side of the CUDA reductions: the fold states (sum, max/min, argmax/argmin), the per-element
// transform and per-output finish, and three kernels over an (outputs M) x (reduced R) geometry:
// a warp or a block per output ("rows": lanes walk the reduced elements), a thread per output
// ("columns": lanes walk adjacent outputs, for reductions over outer dims), and the in-order merge
// of per-split partial states when R is cut into splits.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/cuda/launch.cuh"

namespace tessera::kernels::cuda::reduce_detail {

inline constexpr unsigned kFullMask = 0xffffffffu;

// Sum in Acc (f32 for floats, i64 for integers and bools; integer sums wrap).
template <typename Acc>
struct Sum {
  using State = Acc;
  __device__ __forceinline__ State init() const { return Acc(0); }
  __device__ __forceinline__ State make(Acc v, int64_t) const { return v; }
  __device__ __forceinline__ State combine(State a, State b) const {
    if constexpr (std::is_same_v<Acc, float>) {
      return a + b;
    } else {
      return Acc(uint64_t(a) + uint64_t(b));
    }
  }
  __device__ __forceinline__ State shfl_down(State s, int off) const { return __shfl_down_sync(kFullMask, s, off); }
  __device__ __forceinline__ Acc result(State s) const { return s; }
};

// max (is_max) or min; any NaN wins, like the CPU (and PyTorch's amax/amin).
template <typename Acc>
struct Extreme {
  using State = Acc;
  bool is_max;
  __device__ __forceinline__ State init() const {
    if constexpr (std::is_same_v<Acc, float>) {
      return is_max ? -INFINITY : INFINITY;
    } else {
      return is_max ? std::numeric_limits<Acc>::lowest() : std::numeric_limits<Acc>::max();
    }
  }
  __device__ __forceinline__ State make(Acc v, int64_t) const { return v; }
  __device__ __forceinline__ State combine(State a, State b) const {
    const bool better = is_max ? b > a : b < a;
    return better || b != b ? b : a;
  }
  __device__ __forceinline__ State shfl_down(State s, int off) const { return __shfl_down_sync(kFullMask, s, off); }
  __device__ __forceinline__ Acc result(State s) const { return s; }
};

template <typename V>
struct ArgState {
  V value;
  int64_t index;  // -1: no element yet
};

// argmax / argmin: the first index of the extreme, or of the first NaN when there is one (the CPU's
// rules). combine is order-independent (ties go to the smaller index), so any tree gives the CPU's
// answer.
template <typename V>
struct Arg {
  using State = ArgState<V>;
  bool is_max;
  __device__ __forceinline__ State init() const { return {V(0), -1}; }
  __device__ __forceinline__ State make(V v, int64_t r) const { return {v, r}; }
  __device__ __forceinline__ State combine(State a, State b) const {
    if (a.index < 0) return b;
    if (b.index < 0) return a;
    const bool a_nan = a.value != a.value, b_nan = b.value != b.value;
    if (a_nan || b_nan) {
      if (a_nan && b_nan) return a.index < b.index ? a : b;
      return a_nan ? a : b;
    }
    if (a.value == b.value) return a.index < b.index ? a : b;
    return (is_max ? b.value > a.value : b.value < a.value) ? b : a;
  }
  __device__ __forceinline__ State shfl_down(State s, int off) const {
    return {__shfl_down_sync(kFullMask, s.value, off), __shfl_down_sync(kFullMask, s.index, off)};
  }
  __device__ __forceinline__ int64_t result(State s) const { return s.index; }
};

// g(v, m) applied to each element before the fold (floating reductions only).
enum class TransformKind : uint8_t { identity, abs, square, pow_abs, sq_dev };
struct Transform {
  TransformKind kind = TransformKind::identity;
  float p = 1.0f;
  const float* mean = nullptr;  // sq_dev: each output's mean, in flat output order
  __device__ __forceinline__ float operator()(float v, int64_t m) const {
    switch (kind) {
      case TransformKind::abs: return fabsf(v);
      case TransformKind::square: return v * v;
      case TransformKind::pow_abs: return ::powf(fabsf(v), p);
      case TransformKind::sq_dev: {
        const float d = v - mean[m];
        return d * d;
      }
      default: return v;
    }
  }
};

// The last step on a floating result (mean's and var's division, the norms' roots).
enum class FinishKind : uint8_t { identity, div, sqrt, pow };
struct Finish {
  FinishKind kind = FinishKind::identity;
  float param = 1.0f;
  __device__ __forceinline__ float operator()(float v) const {
    switch (kind) {
      case FinishKind::div: return v / param;
      case FinishKind::sqrt: return ::sqrtf(v);
      case FinishKind::pow: return ::powf(v, param);
      default: return v;
    }
  }
};

// Everything one reduction launch needs. outer maps output m to {out offset, x offset of its first
// reduced element}; inner maps a reduced index r to its x offset from there.
template <typename T, typename Out, typename R>
struct Params {
  const T* x;
  Out* out;
  OffsetCalc<2, int64_t> outer;
  OffsetCalc<1, int64_t> inner;
  int64_t m_count, r_count;
  int splits;
  R red;
  Transform transform;
  Finish finish;
  typename R::State* partial;  // (M, splits) when splits > 1

  __device__ __forceinline__ auto load(int64_t x_base, int64_t r, int64_t m) const {
    const T raw = x[x_base + inner.get(r).v[0]];
    if constexpr (kIsFloat<T>) {
      return red.make(transform(float(raw), m), r);
    } else {
      return red.make(int64_t(raw), r);
    }
  }
  // The reduced range of split s.
  __device__ __forceinline__ void split_range(int s, int64_t& r0, int64_t& r1) const {
    r0 = r_count * s / splits;
    r1 = r_count * (s + 1) / splits;
  }
  // Output m's state for split s: the final value into out, or the partial.
  __device__ __forceinline__ void emit(int64_t m, int s, typename R::State st, int64_t out_off) const {
    if (splits > 1) {
      partial[m * splits + s] = st;
      return;
    }
    auto v = red.result(st);
    if constexpr (std::is_same_v<decltype(v), float>) {
      out[out_off] = Out(finish(v));
    } else {
      out[out_off] = Out(v);
    }
  }
};

template <typename R>
__device__ __forceinline__ typename R::State warp_reduce(const R& red, typename R::State s) {
#pragma unroll
  for (int off = 16; off > 0; off /= 2) s = red.combine(s, red.shfl_down(s, off));
  return s;
}

// kBlock: one output per block (all kThreads threads); else one output per warp.
template <typename T, typename Out, typename R, bool kBlock>
__global__ void __launch_bounds__(kThreads) reduce_rows_kernel(Params<T, Out, R> p) {
  constexpr int kWarps = kThreads / 32;
  __shared__ typename R::State shared[kWarps];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int group = kBlock ? kThreads : 32;
  const int rank = kBlock ? threadIdx.x : lane;
  const int64_t per_block = kBlock ? 1 : kWarps;
  const int s = blockIdx.y;
  int64_t r0, r1;
  p.split_range(s, r0, r1);
  for (int64_t mb = int64_t(blockIdx.x) * per_block; mb < p.m_count; mb += int64_t(gridDim.x) * per_block) {
    const int64_t m = kBlock ? mb : mb + warp;
    typename R::State st = p.red.init();
    Offsets<2, int64_t> o{};
    if (m < p.m_count) {
      o = p.outer.get(m);
      for (int64_t r = r0 + rank; r < r1; r += group) st = p.red.combine(st, p.load(o.v[1], r, m));
    }
    st = warp_reduce(p.red, st);
    if constexpr (kBlock) {
      if (lane == 0) shared[warp] = st;
      __syncthreads();
      if (warp == 0) {
        st = lane < kWarps ? shared[lane] : p.red.init();
        st = warp_reduce(p.red, st);
        if (lane == 0) p.emit(m, s, st, o.v[0]);
      }
      __syncthreads();  // shared is reused by the next output
    } else {
      if (lane == 0 && m < p.m_count) p.emit(m, s, st, o.v[0]);
    }
  }
}

// Block (32, kSlices): threadIdx.x picks one of 32 adjacent outputs, threadIdx.y a slice of the
// reduced range; the slices merge in shared memory.
inline constexpr int kSlices = 8;

template <typename T, typename Out, typename R>
__global__ void __launch_bounds__(32 * kSlices) reduce_cols_kernel(Params<T, Out, R> p) {
  __shared__ typename R::State shared[kSlices][32];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int s = blockIdx.y;
  int64_t r0, r1;
  p.split_range(s, r0, r1);
  for (int64_t mb = int64_t(blockIdx.x) * 32; mb < p.m_count; mb += int64_t(gridDim.x) * 32) {
    const int64_t m = mb + tx;
    typename R::State st = p.red.init();
    Offsets<2, int64_t> o{};
    if (m < p.m_count) {
      o = p.outer.get(m);
      for (int64_t r = r0 + ty; r < r1; r += kSlices) st = p.red.combine(st, p.load(o.v[1], r, m));
    }
    shared[ty][tx] = st;
    __syncthreads();
    if (ty == 0 && m < p.m_count) {
      for (int k = 1; k < kSlices; ++k) st = p.red.combine(st, shared[k][tx]);
      p.emit(m, s, st, o.v[0]);
    }
    __syncthreads();
  }
}

// Merges each output's split partials in split order and writes the finished value.
template <typename T, typename Out, typename R>
__global__ void reduce_merge_kernel(Params<T, Out, R> p) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t m = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; m < p.m_count; m += step) {
    typename R::State st = p.partial[m * p.splits];
    for (int k = 1; k < p.splits; ++k) st = p.red.combine(st, p.partial[m * p.splits + k]);
    auto v = p.red.result(st);
    const int64_t out_off = p.outer.get(m).v[0];
    if constexpr (std::is_same_v<decltype(v), float>) {
      p.out[out_off] = Out(p.finish(v));
    } else {
      p.out[out_off] = Out(v);
    }
  }
}

}  // namespace tessera::kernels::cuda::reduce_detail

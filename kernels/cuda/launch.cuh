// Shared helpers for the hand-written CUDA kernels: strided offset calculators (dims collapsed,
// 32-bit when the tensors allow), grid sizing, device checks, the device guard and warp reductions.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <initializer_list>
#include <type_traits>
#include <vector>

#include "core/cuda/device_guard.h"
#include "core/cuda/runtime.h"
#include "core/half.h"
#include "core/tensor.h"

namespace tessera::kernels::cuda {

inline constexpr int kMaxDims = 12;      // after collapsing; more throws a clear error
inline constexpr int kThreads = 256;     // default block size of the element-wise kernels
inline constexpr int64_t kMaxBlocks = 65536;  // grid-stride loops cover the rest

// Element offsets of N operands at one linear index.
template <int N, typename IndexT>
struct Offsets {
  IndexT v[N];
};

// Maps a row-major linear index over `shape` to an element offset per operand. Dims of size 1 are
// dropped and dims contiguous across all operands merged (as StridedLoop does), then stored
// innermost first. IndexT is uint32_t when every index and offset fits in 31 bits, else int64_t.
template <int N, typename IndexT>
struct OffsetCalc {
  int ndim = 0;  // 0: a single element (every offset 0)
  IndexT sizes[kMaxDims];
  IndexT strides[kMaxDims][N];

  __host__ __device__ __forceinline__ Offsets<N, IndexT> get(IndexT linear) const {
    Offsets<N, IndexT> o;
    for (int k = 0; k < N; ++k) o.v[k] = 0;
    // The outermost dim needs no modulo: linear < numel. (The loops over N, a compile-time
    // constant, are unrolled by the compiler; a pragma here would warn in the host pass.)
    for (int d = 0; d < ndim - 1; ++d) {
      const IndexT q = linear / sizes[d];
      const IndexT idx = linear - q * sizes[d];
      for (int k = 0; k < N; ++k) o.v[k] += idx * strides[d][k];
      linear = q;
    }
    if (ndim > 0) {
      for (int k = 0; k < N; ++k) o.v[k] += linear * strides[ndim - 1][k];
    }
    return o;
  }
};

// Collapsed geometry on the host, outermost first (like StridedLoop).
template <int N>
struct Collapsed {
  std::vector<int64_t> sizes;
  std::vector<std::array<int64_t, N>> strides;
};

template <int N>
Collapsed<N> collapse(const Shape& shape, const std::array<Strides, N>& strides) {
  Collapsed<N> c;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    std::array<int64_t, N> s;
    for (int k = 0; k < N; ++k) s[size_t(k)] = strides[size_t(k)][d];
    if (!c.sizes.empty()) {
      bool mergeable = true;
      for (int k = 0; k < N; ++k) mergeable &= c.strides.back()[size_t(k)] == s[size_t(k)] * shape[d];
      if (mergeable) {
        c.sizes.back() *= shape[d];
        c.strides.back() = s;
        continue;
      }
    }
    c.sizes.push_back(shape[d]);
    c.strides.push_back(s);
  }
  return c;
}

// Whether every linear index and every operand offset of the geometry fits in 31 bits (and no
// stride is negative), so the kernels can use cheap 32-bit division.
template <int N>
bool fits_32bit(const Collapsed<N>& c) {
  int64_t numel = 1;
  for (int64_t s : c.sizes) numel *= s;
  if (numel > INT32_MAX) return false;
  for (int k = 0; k < N; ++k) {
    int64_t hi = 0;
    for (size_t d = 0; d < c.sizes.size(); ++d) {
      const int64_t st = c.strides[d][size_t(k)];
      if (st < 0) return false;
      hi += (c.sizes[d] - 1) * st;
      if (hi > INT32_MAX) return false;
    }
  }
  return true;
}

template <int N, typename IndexT>
OffsetCalc<N, IndexT> make_calc(const Collapsed<N>& c, const char* op) {
  TS_CHECK(c.sizes.size() <= size_t(kMaxDims), op, "expected at most ", kMaxDims,
           " non-mergeable dims on CUDA, got ", c.sizes.size());
  OffsetCalc<N, IndexT> calc;
  calc.ndim = int(c.sizes.size());
  for (int d = 0; d < calc.ndim; ++d) {
    const size_t src = c.sizes.size() - 1 - size_t(d);  // innermost first
    calc.sizes[d] = IndexT(c.sizes[src]);
    for (int k = 0; k < N; ++k) calc.strides[d][k] = IndexT(c.strides[src][size_t(k)]);
  }
  return calc;
}

template <int N>
OffsetCalc<N, int64_t> make_calc64(const Shape& shape, const std::array<Strides, N>& strides,
                                   const char* op) {
  return make_calc<N, int64_t>(collapse<N>(shape, strides), op);
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Blocks for a grid-stride loop over n items, `per_block` items per block and pass.
inline unsigned grid_for(int64_t n, int64_t per_block = kThreads) {
  return unsigned(std::clamp<int64_t>(ceil_div(n, per_block), 1, kMaxBlocks));
}

// Multiprocessors of a device (asked once per device).
int sm_count(int device);

// The stream a tensor's kernels run on.
inline cudaStream_t stream_of(const Tensor& t) { return ::tessera::cuda::current_stream(t.device().index); }

// Throws unless every defined tensor lives on the same CUDA device as the first.
void check_cuda_tensors(const char* op, std::initializer_list<const Tensor*> tensors);

// Makes a tensor's device current for the launches in its scope and restores the previous one.
class TensorDeviceGuard : public ::tessera::cuda::DeviceGuard {
 public:
  explicit TensorDeviceGuard(const Tensor& t) : ::tessera::cuda::DeviceGuard(t.device().index) {}
};

// Launch-error check after every kernel launch.
#define TS_CUDA_LAUNCH_CHECK() TS_CUDA_CHECK(cudaGetLastError())

// ---------------------------------------------------------------- device-side conversions
// 16-bit floats convert through core/half.h's shared rounding, so CPU and GPU round identically.
template <typename T>
__device__ __forceinline__ float to_f32(T v) {
  return float(v);
}

template <typename T>
__device__ __forceinline__ T from_f32(float v) {
  return T(v);
}

template <typename T>
inline constexpr bool kIsHalf = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
template <typename T>
inline constexpr bool kIsFloat = std::is_same_v<T, float> || kIsHalf<T>;
template <typename T>
inline constexpr bool kIsInt = std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>;

// ---------------------------------------------------------------- 128-bit packs
template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

inline bool aligned_to(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

}  // namespace tessera::kernels::cuda

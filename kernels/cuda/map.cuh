// Element-wise map launcher shared by the CUDA element-wise and indexing kernels: a vectorised
// path (128-bit loads and stores) when every operand is contiguous and aligned, a strided path
// (collapsed dims, 32-bit indexing when it fits) otherwise. An adapter (Map1/Map2/Map3) binds the
// operands' pointers to a per-element functor that takes raw element values and returns Out.
#pragma once

#include <algorithm>
#include <array>

#include "kernels/cuda/launch.cuh"

namespace tessera::kernels::cuda {

template <typename... Ts>
inline constexpr int kVecOf = int(16 / std::max({sizeof(Ts)...}));

// out = op(a)
template <typename Out, typename A, typename Op>
struct Map1 {
  static constexpr int kOperands = 2;
  static constexpr int kVec = kVecOf<Out, A>;
  Op op;
  Out* out;
  const A* a;

  template <typename I>
  __device__ __forceinline__ void at(const Offsets<2, I>& o) const {
    out[o.v[0]] = op(a[o.v[1]]);
  }
  __device__ __forceinline__ void one(int64_t i) const { out[i] = op(a[i]); }
  __device__ __forceinline__ void vec(int64_t i) const {
    const Pack<A, kVec> pa = reinterpret_cast<const Pack<A, kVec>*>(a)[i];
    Pack<Out, kVec> po;
#pragma unroll
    for (int j = 0; j < kVec; ++j) po.v[j] = op(pa.v[j]);
    reinterpret_cast<Pack<Out, kVec>*>(out)[i] = po;
  }
  bool aligned() const {
    return aligned_to(out, sizeof(Out) * kVec) && aligned_to(a, sizeof(A) * kVec);
  }
};

// out = op(a, b)
template <typename Out, typename A, typename B, typename Op>
struct Map2 {
  static constexpr int kOperands = 3;
  static constexpr int kVec = kVecOf<Out, A, B>;
  Op op;
  Out* out;
  const A* a;
  const B* b;

  template <typename I>
  __device__ __forceinline__ void at(const Offsets<3, I>& o) const {
    out[o.v[0]] = op(a[o.v[1]], b[o.v[2]]);
  }
  __device__ __forceinline__ void one(int64_t i) const { out[i] = op(a[i], b[i]); }
  __device__ __forceinline__ void vec(int64_t i) const {
    const Pack<A, kVec> pa = reinterpret_cast<const Pack<A, kVec>*>(a)[i];
    const Pack<B, kVec> pb = reinterpret_cast<const Pack<B, kVec>*>(b)[i];
    Pack<Out, kVec> po;
#pragma unroll
    for (int j = 0; j < kVec; ++j) po.v[j] = op(pa.v[j], pb.v[j]);
    reinterpret_cast<Pack<Out, kVec>*>(out)[i] = po;
  }
  bool aligned() const {
    return aligned_to(out, sizeof(Out) * kVec) && aligned_to(a, sizeof(A) * kVec) &&
           aligned_to(b, sizeof(B) * kVec);
  }
};

// out = op(a, b, c)
template <typename Out, typename A, typename B, typename C, typename Op>
struct Map3 {
  static constexpr int kOperands = 4;
  static constexpr int kVec = kVecOf<Out, A, B, C>;
  Op op;
  Out* out;
  const A* a;
  const B* b;
  const C* c;

  template <typename I>
  __device__ __forceinline__ void at(const Offsets<4, I>& o) const {
    out[o.v[0]] = op(a[o.v[1]], b[o.v[2]], c[o.v[3]]);
  }
  __device__ __forceinline__ void one(int64_t i) const { out[i] = op(a[i], b[i], c[i]); }
  __device__ __forceinline__ void vec(int64_t i) const {
    const Pack<A, kVec> pa = reinterpret_cast<const Pack<A, kVec>*>(a)[i];
    const Pack<B, kVec> pb = reinterpret_cast<const Pack<B, kVec>*>(b)[i];
    const Pack<C, kVec> pc = reinterpret_cast<const Pack<C, kVec>*>(c)[i];
    Pack<Out, kVec> po;
#pragma unroll
    for (int j = 0; j < kVec; ++j) po.v[j] = op(pa.v[j], pb.v[j], pc.v[j]);
    reinterpret_cast<Pack<Out, kVec>*>(out)[i] = po;
  }
  bool aligned() const {
    return aligned_to(out, sizeof(Out) * kVec) && aligned_to(a, sizeof(A) * kVec) &&
           aligned_to(b, sizeof(B) * kVec) && aligned_to(c, sizeof(C) * kVec);
  }
};

// Whole packs by a grid-stride loop; the n % kVec tail (fewer elements than threads) one each.
template <typename M>
__global__ void map_vec_kernel(M m, int64_t n_vec, int64_t n) {
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = tid; i < n_vec; i += step) m.vec(i);
  const int64_t tail = n_vec * M::kVec + tid;
  if (tail < n) m.one(tail);
}

template <typename M, typename I>
__global__ void map_strided_kernel(M m, OffsetCalc<M::kOperands, I> calc, I n) {
  const I step = I(gridDim.x) * I(blockDim.x);
  for (I i = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x); i < n; i += step) m.at(calc.get(i));
}

// Runs the map over out's shape. operands: out first, then the inputs in the adapter's order, all
// of out's shape (broadcast inputs as stride-0 views). Every operand is on out's device.
template <typename M>
void launch_map(const M& m, const std::array<const Tensor*, M::kOperands>& operands, const char* op) {
  const Tensor& out = *operands[0];
  const int64_t n = out.numel();
  if (n == 0) return;
  TensorDeviceGuard guard(out);
  cudaStream_t stream = stream_of(out);
  bool contiguous = true;
  for (const Tensor* t : operands) contiguous &= t->is_contiguous();
  if (contiguous && m.aligned()) {
    const int64_t n_vec = n / M::kVec;
    map_vec_kernel<M><<<grid_for(std::max<int64_t>(n_vec, 1)), kThreads, 0, stream>>>(m, n_vec, n);
    TS_CUDA_LAUNCH_CHECK();
    return;
  }
  std::array<Strides, M::kOperands> strides;
  for (size_t k = 0; k < operands.size(); ++k) strides[k] = operands[k]->strides();
  const auto c = collapse<M::kOperands>(out.shape(), strides);
  if (fits_32bit(c)) {
    const auto calc = make_calc<M::kOperands, uint32_t>(c, op);
    map_strided_kernel<M, uint32_t><<<grid_for(n), kThreads, 0, stream>>>(m, calc, uint32_t(n));
  } else {
    const auto calc = make_calc<M::kOperands, int64_t>(c, op);
    map_strided_kernel<M, int64_t><<<grid_for(n), kThreads, 0, stream>>>(m, calc, n);
  }
  TS_CUDA_LAUNCH_CHECK();
}

}  // namespace tessera::kernels::cuda

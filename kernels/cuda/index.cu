// CUDA gather / scatter_add along `dim`: one thread per index element. Index values are checked on
// the device before anything is written (one stream sync), so a bad index throws like the CPU and
// never touches memory out of range. scatter_add uses atomics: f32, i32 and i64 add in place
// (f32 order is not deterministic); f16/bf16 accumulate in an f32 copy, rounded once at the end.
#include <type_traits>

#include "core/factory.h"
#include "kernels/arg_checks.h"
#include "kernels/cuda/index.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/map.cuh"

namespace tessera::kernels::cuda {
namespace {

// The walk over index's shape: operand 0 is the dense side shaped like index (gather's out,
// scatter's src), 1 the index, 2 the indexed side (gather's x, scatter's out) with its `dim`
// stride zeroed: the index value times `step` replaces that coordinate.
struct Walk {
  OffsetCalc<3, int64_t> calc;
  int64_t n = 0;
  int64_t step = 0;
  int64_t bound = 1;
};

Walk make_walk(const Tensor& dense, const Tensor& index, const Strides& indexed_strides,
               int64_t indexed_size, int64_t dim, const char* op) {
  Walk w;
  Strides zeroed = indexed_strides;
  if (index.dim() > 0) {
    w.step = indexed_strides[size_t(dim)];
    w.bound = indexed_size;
    zeroed[size_t(dim)] = 0;
  }
  w.calc = make_calc64<3>(index.shape(), {dense.strides(), index.strides(), zeroed}, op);
  w.n = index.numel();
  return w;
}

__global__ void check_index_kernel(const int64_t* index, Walk w, int* bad) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < w.n; i += stride) {
    const int64_t v = index[w.calc.get(i).v[1]];
    if (v < 0 || v >= w.bound) atomicExch(bad, 1);
  }
}

template <typename T>
__global__ void gather_kernel(const T* x, const int64_t* index, T* out, Walk w) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < w.n; i += stride) {
    const Offsets<3, int64_t> o = w.calc.get(i);
    const int64_t v = index[o.v[1]];
    if (v >= 0 && v < w.bound) out[o.v[0]] = x[o.v[2] + v * w.step];
  }
}

__device__ __forceinline__ void atomic_add(float* p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(int32_t* p, int32_t v) { atomicAdd(p, v); }
// Two's-complement addition is the same on unsigned bits.
__device__ __forceinline__ void atomic_add(int64_t* p, int64_t v) {
  atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
}

// Src: the source's element type; Acc: the type added into (f32 for 16-bit outputs).
template <typename Src, typename Acc>
__global__ void scatter_add_kernel(const Src* src, const int64_t* index, Acc* out, Walk w) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < w.n; i += stride) {
    const Offsets<3, int64_t> o = w.calc.get(i);
    const int64_t v = index[o.v[1]];
    if (v >= 0 && v < w.bound) atomic_add(out + o.v[2] + v * w.step, Acc(src[o.v[0]]));
  }
}

template <typename To>
struct Convert {
  template <typename From>
  __device__ __forceinline__ To operator()(From v) const {
    return To(float(v));
  }
};

// Shapes and dtypes (torch rules); index values are checked on the device by check_values.
void check_args(const char* op, const Tensor& dense, const Tensor& index, const Tensor& indexed,
                int64_t dim, bool dense_equal) {
  check_cuda_tensors(op, {&dense, &index, &indexed});
  check_index_args(op, dense, index, indexed, dim, dense_equal);
}

// Throws unless every index value lies in [0, w.bound); waits for the stream.
void check_values(const char* op, const Tensor& index, const Walk& w, int64_t dim) {
  cudaStream_t stream = stream_of(index);
  Tensor flag = empty({1}, {.dtype = DType::i32, .device = index.device()});
  int* bad = static_cast<int*>(flag.data_ptr());
  TS_CUDA_CHECK(cudaMemsetAsync(bad, 0, sizeof(int), stream));
  check_index_kernel<<<grid_for(w.n), kThreads, 0, stream>>>(
      static_cast<const int64_t*>(index.data_ptr()), w, bad);
  TS_CUDA_LAUNCH_CHECK();
  int host_bad = 0;
  TS_CUDA_CHECK(cudaMemcpyAsync(&host_bad, bad, sizeof(int), cudaMemcpyDeviceToHost, stream));
  TS_CUDA_CHECK(cudaStreamSynchronize(stream));
  TS_CHECK(host_bad == 0, op, "expected index values in [0, ", w.bound, ") along dim ", dim,
           ", got a value outside (index ", index.describe(), ")");
}

}  // namespace

void gather(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out) {
  const char* op = "gather";
  const int64_t d = x.dim() == 0 ? 0 : wrap_dim(dim, x.dim(), op);
  check_args(op, out, index, x, d, /*dense_equal=*/true);
  if (index.numel() == 0) return;
  TensorDeviceGuard guard(x);
  const Walk w = make_walk(out, index, x.strides(), x.dim() == 0 ? 1 : x.size(d), d, op);
  check_values(op, index, w, d);
  cudaStream_t stream = stream_of(x);
  dispatch_dtype(x.dtype(), [&]<typename T>() {
    gather_kernel<T><<<grid_for(w.n), kThreads, 0, stream>>>(
        static_cast<const T*>(x.data_ptr()), static_cast<const int64_t*>(index.data_ptr()),
        static_cast<T*>(out.data_ptr()), w);
    TS_CUDA_LAUNCH_CHECK();
  });
}

void scatter_add(const Tensor& src, int64_t dim, const Tensor& index, const Tensor& out) {
  const char* op = "scatter_add";
  const int64_t d = out.dim() == 0 ? 0 : wrap_dim(dim, out.dim(), op);
  TS_CHECK(out.dtype() != DType::b8, op, "expected a numeric dtype, got ", out.describe());
  check_args(op, src, index, out, d, /*dense_equal=*/false);
  if (index.numel() == 0) return;
  TensorDeviceGuard guard(out);
  const int64_t size_d = out.dim() == 0 ? 1 : out.size(d);
  cudaStream_t stream = stream_of(out);
  const int64_t* ip = static_cast<const int64_t*>(index.data_ptr());
  dispatch_dtype(out.dtype(), [&]<typename T>() {
    if constexpr (kIsHalf<T>) {
      // Accumulate in f32 so that many additions into one element round once, not per add.
      Tensor acc = empty(out.shape(), {.dtype = DType::f32, .device = out.device()});
      float* pa = static_cast<float*>(acc.data_ptr());
      launch_map(Map1<float, T, Convert<float>>{{}, pa, static_cast<const T*>(out.data_ptr())},
                 {&acc, &out}, op);
      const Walk w = make_walk(src, index, acc.strides(), size_d, d, op);
      check_values(op, index, w, d);
      scatter_add_kernel<T, float><<<grid_for(w.n), kThreads, 0, stream>>>(
          static_cast<const T*>(src.data_ptr()), ip, pa, w);
      TS_CUDA_LAUNCH_CHECK();
      launch_map(Map1<T, float, Convert<T>>{{}, static_cast<T*>(out.data_ptr()), pa}, {&out, &acc},
                 op);
    } else if constexpr (!std::is_same_v<T, bool>) {
      const Walk w = make_walk(src, index, out.strides(), size_d, d, op);
      check_values(op, index, w, d);
      scatter_add_kernel<T, T><<<grid_for(w.n), kThreads, 0, stream>>>(
          static_cast<const T*>(src.data_ptr()), ip, static_cast<T*>(out.data_ptr()), w);
      TS_CUDA_LAUNCH_CHECK();
    }
  });
}

}  // namespace tessera::kernels::cuda

// Copies between host and device and on device: byte copies for contiguous same-dtype pairs, a
// strided casting kernel for everything else, and the fill kernel.
#include <algorithm>
#include <type_traits>

#include "core/copy.h"
#include "core/cuda/copy.h"
#include "core/cuda/device_guard.h"
#include "core/cuda/pinned.h"
#include "core/cuda/runtime.h"
#include "core/factory.h"
#include "core/half.h"

namespace tessera::cuda {
namespace {

constexpr int kMaxDims = 16;
constexpr int kThreads = 256;

// A copy's index space after dropping size-1 dims and merging dims both operands step evenly
// across (outermost first). Passed to kernels by value.
struct Geometry {
  int ndim = 0;
  int64_t sizes[kMaxDims];
  int64_t dst_strides[kMaxDims];
  int64_t src_strides[kMaxDims];
};

Geometry collapse(const Shape& shape, const Strides& dst_strides, const Strides& src_strides) {
  Geometry g;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (g.ndim > 0 && g.dst_strides[g.ndim - 1] == dst_strides[d] * shape[d] &&
        g.src_strides[g.ndim - 1] == src_strides[d] * shape[d]) {
      g.sizes[g.ndim - 1] *= shape[d];
      g.dst_strides[g.ndim - 1] = dst_strides[d];
      g.src_strides[g.ndim - 1] = src_strides[d];
      continue;
    }
    TS_CHECK(g.ndim < kMaxDims, "cuda copy", "expected at most ", kMaxDims,
             " non-mergeable dims, got shape ", shape_str(shape), " with strides ",
             shape_str(dst_strides), " and ", shape_str(src_strides));
    g.sizes[g.ndim] = shape[d];
    g.dst_strides[g.ndim] = dst_strides[d];
    g.src_strides[g.ndim] = src_strides[d];
    ++g.ndim;
  }
  if (g.ndim == 0) {  // a single element
    g.ndim = 1;
    g.sizes[0] = 1;
    g.dst_strides[0] = g.src_strides[0] = 0;
  }
  return g;
}

template <typename T>
inline constexpr bool kIs16 = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// The CPU copy's conversion (core/copy.cc), usable on both sides: 16-bit floats go through float.
template <typename To, typename From>
TS_HOST_DEVICE TS_INLINE To convert(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return float(v) != 0.0f;
  } else if constexpr (kIs16<To> || kIs16<From>) {
    return To(float(v));
  } else {
    return To(v);
  }
}

// Element offsets of flat index i in dst and src.
__device__ __forceinline__ void offsets(const Geometry& g, int64_t i, int64_t* od, int64_t* os) {
  if (g.ndim == 1) {
    *od = i * g.dst_strides[0];
    *os = i * g.src_strides[0];
    return;
  }
  int64_t d_off = 0, s_off = 0;
  for (int d = g.ndim - 1; d >= 0; --d) {
    const int64_t idx = i % g.sizes[d];
    i /= g.sizes[d];
    d_off += idx * g.dst_strides[d];
    s_off += idx * g.src_strides[d];
  }
  *od = d_off;
  *os = s_off;
}

template <typename D, typename S>
__global__ void copy_kernel(D* __restrict__ dst, const S* __restrict__ src, Geometry g, int64_t n) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t od, os;
    offsets(g, i, &od, &os);
    dst[od] = convert<D>(src[os]);
  }
}

template <typename D>
__global__ void fill_kernel(D* dst, D value, Geometry g, int64_t n) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t od, os;
    offsets(g, i, &od, &os);
    dst[od] = value;
  }
}

unsigned grid_for(int64_t n) {
  return unsigned(std::min<int64_t>((n + kThreads - 1) / kThreads, 65536));
}

// dst <- src, both on the device current for the caller, queued on `stream`.
void launch_copy(const Tensor& src, const Tensor& dst, cudaStream_t stream) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  const Geometry g = collapse(dst.shape(), dst.strides(), src.strides());
  dispatch_dtype(dst.dtype(), [&]<typename D>() {
    dispatch_dtype(src.dtype(), [&]<typename S>() {
      copy_kernel<D, S><<<grid_for(n), kThreads, 0, stream>>>(
          static_cast<D*>(dst.data_ptr()), static_cast<const S*>(src.data_ptr()), g, n);
    });
  });
  TS_CUDA_CHECK(cudaGetLastError());
}

size_t nbytes_of(const Tensor& t) { return size_t(t.numel()) * t.itemsize(); }

bool is_plain(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.is_contiguous() && b.is_contiguous();
}

// Both on one device.
void copy_on_device(const Tensor& src, const Tensor& dst) {
  const int dev = dst.device().index;
  DeviceGuard guard(dev);
  cudaStream_t stream = current_stream(dev);
  if (is_plain(src, dst)) {
    TS_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), nbytes_of(dst),
                                  cudaMemcpyDeviceToDevice, stream));
  } else {
    launch_copy(src, dst, stream);
  }
}

void copy_host_to_device(const Tensor& src, const Tensor& dst) {
  const int dev = dst.device().index;
  DeviceGuard guard(dev);
  cudaStream_t stream = current_stream(dev);
  const Tensor host = src.contiguous();  // (shape) src dtype, materialises broadcasts too
  if (is_plain(host, dst)) {
    TS_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), host.data_ptr(), nbytes_of(dst),
                                  cudaMemcpyHostToDevice, stream));
  } else {
    // Upload as is, then cast and scatter on the device.
    const Tensor staged = empty(dst.shape(), {.dtype = src.dtype(), .device = dst.device()});
    TS_CUDA_CHECK(cudaMemcpyAsync(staged.data_ptr(), host.data_ptr(), nbytes_of(staged),
                                  cudaMemcpyHostToDevice, stream));
    launch_copy(staged, dst, stream);
  }
  TS_CUDA_CHECK(cudaStreamSynchronize(stream));  // `host` and the caller's src are reusable now
}

void copy_device_to_host(const Tensor& src, const Tensor& dst) {
  const int dev = src.device().index;
  DeviceGuard guard(dev);
  cudaStream_t stream = current_stream(dev);
  Tensor packed = src;  // (shape) src dtype, contiguous on the device
  if (!src.is_contiguous()) {
    packed = empty(src.shape(), {.dtype = src.dtype(), .device = src.device()});
    launch_copy(src, packed, stream);
  }
  if (is_plain(packed, dst)) {
    TS_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), packed.data_ptr(), nbytes_of(dst),
                                  cudaMemcpyDeviceToHost, stream));
    TS_CUDA_CHECK(cudaStreamSynchronize(stream));
    return;
  }
  const Tensor host = empty(src.shape(), {.dtype = src.dtype()});
  TS_CUDA_CHECK(cudaMemcpyAsync(host.data_ptr(), packed.data_ptr(), nbytes_of(host),
                                cudaMemcpyDeviceToHost, stream));
  TS_CUDA_CHECK(cudaStreamSynchronize(stream));
  copy_tensor(host, dst);  // the cast and the strides on the CPU, with the same conversion
}

void copy_across_devices(const Tensor& src, const Tensor& dst) {
  const int from = src.device().index, to = dst.device().index;
  Tensor packed = src;
  {
    DeviceGuard guard(from);
    cudaStream_t stream = current_stream(from);
    if (!src.is_contiguous()) {
      packed = empty(src.shape(), {.dtype = src.dtype(), .device = src.device()});
      launch_copy(src, packed, stream);
    }
    TS_CUDA_CHECK(cudaStreamSynchronize(stream));  // src is complete before the other device reads
  }
  DeviceGuard guard(to);
  cudaStream_t stream = current_stream(to);
  const bool direct = is_plain(packed, dst);
  const Tensor target =
      direct ? dst : empty(dst.shape(), {.dtype = src.dtype(), .device = dst.device()});
  TS_CUDA_CHECK(cudaMemcpyPeerAsync(target.data_ptr(), to, packed.data_ptr(), from,
                                    nbytes_of(target), stream));
  if (!direct) launch_copy(target, dst, stream);
  // The source side may be reused by its own stream as soon as we return.
  TS_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace

void device_copy(const Tensor& src, const Tensor& dst) {
  TS_CHECK(src.shape() == dst.shape(), "cuda copy", "expected equal shapes, got ", src.describe(),
           " and ", dst.describe());
  if (dst.numel() == 0) return;
  const bool s_cuda = src.device().is_cuda(), d_cuda = dst.device().is_cuda();
  if (s_cuda && d_cuda) {
    if (src.device() == dst.device()) return copy_on_device(src, dst);
    return copy_across_devices(src, dst);
  }
  if (d_cuda) return copy_host_to_device(src, dst);
  if (s_cuda) return copy_device_to_host(src, dst);
  copy_tensor(src, dst);  // both on the CPU
}

void device_fill(const Tensor& dst, double value) {
  TS_CHECK(dst.device().is_cuda(), "cuda fill", "expected a cuda tensor, got ", dst.describe());
  const int64_t n = dst.numel();
  if (n == 0) return;
  const int dev = dst.device().index;
  DeviceGuard guard(dev);
  cudaStream_t stream = current_stream(dev);
  const Strides zero(dst.strides().size(), 0);
  const Geometry g = collapse(dst.shape(), dst.strides(), zero);
  dispatch_dtype(dst.dtype(), [&]<typename D>() {
    const D v = convert<D>(value);
    fill_kernel<D><<<grid_for(n), kThreads, 0, stream>>>(static_cast<D*>(dst.data_ptr()), v, g, n);
  });
  TS_CUDA_CHECK(cudaGetLastError());
}

void copy_async(const Tensor& src, const Tensor& dst, cudaStream_t stream) {
  TS_CHECK(src.shape() == dst.shape() && src.dtype() == dst.dtype(), "copy_async",
           "expected equal shapes and dtypes, got ", src.describe(), " and ", dst.describe());
  TS_CHECK(src.is_contiguous() && dst.is_contiguous(), "copy_async",
           "expected contiguous tensors, got strides ", shape_str(src.strides()), " and ",
           shape_str(dst.strides()));
  const bool s_cuda = src.device().is_cuda(), d_cuda = dst.device().is_cuda();
  TS_CHECK(s_cuda || d_cuda, "copy_async", "expected a cuda tensor on one side, got ",
           src.describe(), " and ", dst.describe());
  TS_CHECK(s_cuda || is_pinned(src), "copy_async",
           "expected a pinned host source (pin_memory), got ", src.describe());
  TS_CHECK(d_cuda || is_pinned(dst), "copy_async",
           "expected a pinned host destination (pinned_empty), got ", dst.describe());
  const size_t bytes = nbytes_of(dst);
  if (bytes == 0) return;
  DeviceGuard guard(d_cuda ? dst.device().index : src.device().index);
  if (s_cuda && d_cuda && src.device() != dst.device()) {
    TS_CUDA_CHECK(cudaMemcpyPeerAsync(dst.data_ptr(), dst.device().index, src.data_ptr(),
                                      src.device().index, bytes, stream));
    return;
  }
  const cudaMemcpyKind kind = s_cuda && d_cuda ? cudaMemcpyDeviceToDevice
                              : s_cuda         ? cudaMemcpyDeviceToHost
                                               : cudaMemcpyHostToDevice;
  TS_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), bytes, kind, stream));
}

}  // namespace tessera::cuda

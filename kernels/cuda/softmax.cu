// CUDA softmax, log-softmax and their backwards over the last dim: one warp per row for rows up to
// kBlockCols, one block per row above, f32 accumulation, max-subtracted like the CPU (same max rule,
// so a NaN row gives NaN, and the shared math::exp). Rows may have any strides.
#include <cmath>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/softmax.h"
#include "kernels/math.h"

namespace tessera::kernels::cuda {
namespace {

enum class Kind : uint8_t { softmax, log_softmax, softmax_backward, log_softmax_backward };

inline constexpr int64_t kBlockCols = 1024;
inline constexpr int kWarps = kThreads / 32;

// a: x (forward) or y (backward), b: grad_y (backward only), out: out or grad_x.
template <typename T>
struct Params {
  const T* a;
  const T* b;
  T* out;
  OffsetCalc<3, int64_t> rows;  // row index -> {a, b, out} offset of the row's first element
  int64_t sa, sb, so;           // last-dim strides
  int64_t n_rows, cols;
  Kind kind;
};

// Max (the CPU's `v > m` rule: NaN never wins, it surfaces through exp) or sum over a warp or the
// block; every thread of the group gets the result.
template <bool kBlock>
__device__ __forceinline__ float group_reduce(float v, bool is_max, float* shared) {
#pragma unroll
  for (int off = 16; off > 0; off /= 2) {
    const float o = __shfl_down_sync(0xffffffffu, v, off);
    v = is_max ? (o > v ? o : v) : v + o;
  }
  v = __shfl_sync(0xffffffffu, v, 0);
  if constexpr (kBlock) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = shared[0];
    for (int w = 1; w < kWarps; ++w) v = is_max ? (shared[w] > v ? shared[w] : v) : v + shared[w];
    __syncthreads();  // shared is reused by the next reduction
  }
  return v;
}

template <typename T, bool kBlock>
__global__ void __launch_bounds__(kThreads) softmax_kernel(Params<T> p) {
  __shared__ float shared[kWarps];
  const int group = kBlock ? kThreads : 32;
  const int rank = kBlock ? threadIdx.x : threadIdx.x % 32;
  const int64_t per_block = kBlock ? 1 : kWarps;
  const int64_t first = int64_t(blockIdx.x) * per_block + (kBlock ? 0 : threadIdx.x / 32);
  const int64_t n = p.cols;
  // `row` is uniform across each group, so the group's shuffles and barriers stay converged.
  for (int64_t row = first; row < p.n_rows; row += int64_t(gridDim.x) * per_block) {
    const Offsets<3, int64_t> o = p.rows.get(row);
    const T* a = p.a + o.v[0];
    const T* b = p.b + o.v[1];
    T* out = p.out + o.v[2];
    switch (p.kind) {
      case Kind::softmax:
      case Kind::log_softmax: {
        float m = -INFINITY;
        for (int64_t i = rank; i < n; i += group) {
          const float v = float(a[i * p.sa]);
          m = v > m ? v : m;
        }
        m = group_reduce<kBlock>(m, true, shared);
        float s = 0.0f;
        for (int64_t i = rank; i < n; i += group) s += math::exp(float(a[i * p.sa]) - m);
        s = group_reduce<kBlock>(s, false, shared);
        if (p.kind == Kind::softmax) {
          const float inv = 1.0f / s;
          for (int64_t i = rank; i < n; i += group) out[i * p.so] = T(math::exp(float(a[i * p.sa]) - m) * inv);
        } else {
          // (x - m) - log(s), not x - (m + log(s)): the latter loses digits when |m| is large.
          const float log_s = ::logf(s);
          for (int64_t i = rank; i < n; i += group) out[i * p.so] = T((float(a[i * p.sa]) - m) - log_s);
        }
        break;
      }
      case Kind::softmax_backward: {
        float dot = 0.0f;
        for (int64_t i = rank; i < n; i += group) dot += float(a[i * p.sa]) * float(b[i * p.sb]);
        dot = group_reduce<kBlock>(dot, false, shared);
        for (int64_t i = rank; i < n; i += group) {
          const float y = float(a[i * p.sa]);
          out[i * p.so] = T(y * (float(b[i * p.sb]) - dot));
        }
        break;
      }
      case Kind::log_softmax_backward: {
        float total = 0.0f;
        for (int64_t i = rank; i < n; i += group) total += float(b[i * p.sb]);
        total = group_reduce<kBlock>(total, false, shared);
        for (int64_t i = rank; i < n; i += group) {
          out[i * p.so] = T(float(b[i * p.sb]) - math::exp(float(a[i * p.sa])) * total);
        }
        break;
      }
    }
  }
}

void check_pair(const char* op, const Tensor& a, const Tensor& b) {
  TS_CHECK(a.shape() == b.shape() && a.dtype() == b.dtype(), op,
           "expected tensors of equal shape and dtype, got ", a.describe(), " and ", b.describe());
}

// b may be undefined (forward kinds).
void launch(Kind kind, const char* op, const Tensor& a, const Tensor& b, const Tensor& out) {
  check_cuda_tensors(op, {&a, &b, &out});
  check_pair(op, a, out);
  if (b.defined()) check_pair(op, a, b);
  const Tensor& bb = b.defined() ? b : a;
  const int64_t nd = out.dim();
  const int64_t cols = nd == 0 ? 1 : out.size(nd - 1);
  const int64_t n_rows = cols == 0 ? 0 : out.numel() / cols;
  dispatch_floating(a.dtype(), op, [&]<typename T>() {
    if (n_rows == 0) return;
    const Shape lead(out.shape().begin(), out.shape().end() - (nd == 0 ? 0 : 1));
    auto lead_strides = [&](const Tensor& t) { return Strides(t.strides().begin(), t.strides().begin() + int64_t(lead.size())); };
    auto last_stride = [&](const Tensor& t) { return nd == 0 ? int64_t(0) : t.stride(nd - 1); };
    Params<T> p{};
    p.a = static_cast<const T*>(a.data_ptr());
    p.b = static_cast<const T*>(bb.data_ptr());
    p.out = static_cast<T*>(out.data_ptr());
    p.rows = make_calc64<3>(lead, {lead_strides(a), lead_strides(bb), lead_strides(out)}, op);
    p.sa = last_stride(a);
    p.sb = last_stride(bb);
    p.so = last_stride(out);
    p.n_rows = n_rows;
    p.cols = cols;
    p.kind = kind;
    TensorDeviceGuard guard(out);
    cudaStream_t stream = stream_of(out);
    if (cols > kBlockCols) {
      softmax_kernel<T, true><<<grid_for(n_rows, 1), kThreads, 0, stream>>>(p);
    } else {
      softmax_kernel<T, false><<<grid_for(n_rows, kWarps), kThreads, 0, stream>>>(p);
    }
    TS_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace

void softmax(const Tensor& x, const Tensor& out) { launch(Kind::softmax, "softmax", x, Tensor(), out); }

void log_softmax(const Tensor& x, const Tensor& out) {
  launch(Kind::log_softmax, "log_softmax", x, Tensor(), out);
}

void softmax_backward(const Tensor& y, const Tensor& grad_y, const Tensor& grad_x) {
  launch(Kind::softmax_backward, "softmax_backward", y, grad_y, grad_x);
}

void log_softmax_backward(const Tensor& y, const Tensor& grad_y, const Tensor& grad_x) {
  launch(Kind::log_softmax_backward, "log_softmax_backward", y, grad_y, grad_x);
}

}  // namespace tessera::kernels::cuda

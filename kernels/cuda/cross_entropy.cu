// CUDA cross-entropy fused with log-softmax. The forward gives each row a block that reads the
// logits once (online max and sum of exp, plus the row sum for label smoothing); the backward
// writes softmax minus the smoothed one-hot element-wise, straight into grad_logits (which may be
// the logits themselves). Logits are read through their strides, never copied. Targets outside
// [0, V) that are not ignore_index (the CPU kernel throws for them) give NaN losses and gradients
// instead of a host round trip.
#include "kernels/cuda/cross_entropy.h"

#include <math.h>

#include "kernels/cuda/nn_util.cuh"

namespace tessera::kernels::cuda {
namespace {

namespace nu = nn_util;

// Running (max, sum of exp(x - max)) of a set of logits; the merge is commutative bit for bit.
struct MaxSum {
  float m = -INFINITY, s = 0.0f;
};

__device__ __forceinline__ void max_sum_add(MaxSum& a, float x) {
  if (x > a.m) {
    a.s = a.s * expf(a.m - x) + 1.0f;
    a.m = x;
  } else if (a.m > -INFINITY) {  // x == m == -inf adds nothing (and no NaN)
    a.s += expf(x - a.m);
  }
}

__device__ __forceinline__ MaxSum max_sum_merge(const MaxSum& a, const MaxSum& b) {
  MaxSum r;
  r.m = fmaxf(a.m, b.m);
  r.s = r.m == -INFINITY ? 0.0f : a.s * expf(a.m - r.m) + b.s * expf(b.m - r.m);
  return r;
}

struct RowIo {
  int64_t N, V;
  int64_t row_stride, col_stride;  // logits / grad_logits, in elements
  const int64_t* targets;
  int64_t target_stride;
  int64_t ignore_index;
  float smoothing;
};

__device__ __forceinline__ bool target_ok(int64_t t, int64_t V) { return t >= 0 && t < V; }

// One block per row (grid-stride over rows): losses[r], lse[r] (f32, their strides).
template <typename T>
__global__ void cross_entropy_forward_kernel(const T* logits, RowIo io, float* losses,
                                             int64_t loss_stride, float* lse, int64_t lse_stride) {
  __shared__ float sm[32], ss[32], sx[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const bool smooth = io.smoothing != 0.0f;
  for (int64_t r = blockIdx.x; r < io.N; r += gridDim.x) {
    const T* row = logits + r * io.row_stride;
    MaxSum acc;
    float xsum = 0.0f;
    for (int64_t v = threadIdx.x; v < io.V; v += blockDim.x) {
      const float x = float(row[v * io.col_stride]);
      max_sum_add(acc, x);
      if (smooth) xsum += x;
    }
    for (int o = 16; o > 0; o >>= 1) {
      MaxSum other;
      other.m = __shfl_xor_sync(0xFFFFFFFFu, acc.m, o);
      other.s = __shfl_xor_sync(0xFFFFFFFFu, acc.s, o);
      acc = max_sum_merge(acc, other);
    }
    xsum = nu::warp_sum(xsum);
    __syncthreads();  // the previous row's thread 0 is done reading the shared arrays
    if (lane == 0) {
      sm[warp] = acc.m;
      ss[warp] = acc.s;
      sx[warp] = xsum;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      MaxSum total;
      float xs = 0.0f;
      for (int k = 0; k < warps; ++k) {
        MaxSum part;
        part.m = sm[k];
        part.s = ss[k];
        total = max_sum_merge(total, part);
        xs += sx[k];
      }
      const float log_s = logf(total.s);
      lse[r * lse_stride] = total.m + log_s;
      const int64_t t = io.targets[r * io.target_stride];
      float loss;
      if (t == io.ignore_index) {
        loss = 0.0f;
      } else if (!target_ok(t, io.V)) {
        loss = NAN;
      } else {
        // Differences to the max first: lse - x_t loses digits when |m| is large.
        loss = (total.m - float(row[t * io.col_stride])) + log_s;
        if (smooth) {
          const float s = io.smoothing;
          loss = (1.0f - s) * loss + s * ((total.m - xs / float(io.V)) + log_s);
        }
      }
      losses[r * loss_stride] = loss;
    }
  }
}

// out[r, v] = g_r (softmax_v - s / V - (1 - s) [v == t_r]); 0 on ignored rows. out may alias logits
// (each element is read and then written by the same thread).
template <typename T>
__global__ void cross_entropy_backward_kernel(const T* logits, RowIo io, const float* lse,
                                              int64_t lse_stride, const float* grad,
                                              int64_t grad_stride, T* out, int64_t out_row_stride,
                                              int64_t out_col_stride) {
  const int64_t total = io.N * io.V;
  const float per_class = io.smoothing / float(io.V);
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = e / io.V, v = e - r * io.V;
    const int64_t t = io.targets[r * io.target_stride];
    float val;
    if (t == io.ignore_index) {
      val = 0.0f;
    } else if (!target_ok(t, io.V)) {
      val = NAN;
    } else {
      const float g = grad[r * grad_stride];
      const float x = float(logits[r * io.row_stride + v * io.col_stride]);
      val = expf(x - lse[r * lse_stride]) * g + (-g * per_class);
      if (v == t) val -= g * (1.0f - io.smoothing);
    }
    out[r * out_row_stride + v * out_col_stride] = T(val);
  }
}

void check_common(const char* op, const Tensor& logits, const Tensor& targets, double smoothing) {
  TS_CHECK(logits.dim() == 2, op, "expected logits of shape (N, V), got ", logits.describe());
  TS_CHECK(targets.dtype() == DType::i64 && targets.dim() == 1 && targets.size(0) == logits.size(0),
           op, "expected targets i64 of shape (", logits.size(0), "), got ", targets.describe());
  TS_CHECK(smoothing >= 0.0 && smoothing <= 1.0, op, "expected label_smoothing in [0, 1], got ",
           smoothing);
  nu::check_on_device(targets, logits.device(), op, "targets");
}

void check_rows_f32(const char* op, const char* name, const Tensor& t, int64_t N, Device d) {
  TS_CHECK(t.dim() == 1 && t.size(0) == N && t.dtype() == DType::f32, op, "expected ", name,
           " f32 of shape (", N, "), got ", t.describe());
  nu::check_on_device(t, d, op, name);
}

RowIo row_io(const Tensor& logits, const Tensor& targets, int64_t ignore_index, double smoothing) {
  return RowIo{logits.size(0),   logits.size(1),       logits.stride(0),
               logits.stride(1), targets.data<int64_t>(), targets.stride(0),
               ignore_index,     float(smoothing)};
}

}  // namespace

void cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                   double label_smoothing, const Tensor& losses, const Tensor& lse) {
  const char* op = "cross_entropy";
  check_common(op, logits, targets, label_smoothing);
  const int64_t N = logits.size(0), V = logits.size(1);
  check_rows_f32(op, "losses", losses, N, logits.device());
  check_rows_f32(op, "lse", lse, N, logits.device());
  TS_CHECK(V > 0 || N == 0, op, "expected at least one class, got logits ", logits.describe());
  if (N == 0) return;
  nu::DeviceGuard guard(logits.device());
  const RowIo io = row_io(logits, targets, ignore_index, label_smoothing);
  const int threads = V >= 1024 ? 512 : 128;
  dispatch_floating(logits.dtype(), op, [&]<typename T>() {
    cross_entropy_forward_kernel<T><<<nu::grid_for(N, 1), threads, 0, nu::stream_for(logits)>>>(
        static_cast<const T*>(logits.data_ptr()), io, losses.data<float>(), losses.stride(0),
        lse.data<float>(), lse.stride(0));
    nu::check_launch();
  });
}

void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                            const Tensor& grad_losses, int64_t ignore_index, double label_smoothing,
                            const Tensor& grad_logits) {
  const char* op = "cross_entropy_backward";
  check_common(op, logits, targets, label_smoothing);
  const Device d = logits.device();
  const int64_t N = logits.size(0), V = logits.size(1);
  check_rows_f32(op, "lse", lse, N, d);
  TS_CHECK(grad_losses.dim() == 1 && grad_losses.size(0) == N && is_floating(grad_losses.dtype()),
           op, "expected grad_losses floating of shape (", N, "), got ", grad_losses.describe());
  nu::check_on_device(grad_losses, d, op, "grad_losses");
  TS_CHECK(grad_logits.shape() == logits.shape() && grad_logits.dtype() == logits.dtype() &&
               grad_logits.device() == d,
           op, "expected grad_logits like logits ", logits.describe(), ", got ",
           grad_logits.describe());
  if (N == 0 || V == 0) return;
  nu::DeviceGuard guard(d);
  const Tensor g = grad_losses.to(DType::f32);
  const RowIo io = row_io(logits, targets, ignore_index, label_smoothing);
  constexpr int kThreads = 256;
  dispatch_floating(logits.dtype(), op, [&]<typename T>() {
    cross_entropy_backward_kernel<T>
        <<<nu::grid_for(N * V, kThreads, 1 << 20), kThreads, 0, nu::stream_for(logits)>>>(
            static_cast<const T*>(logits.data_ptr()), io, lse.data<float>(), lse.stride(0),
            g.data<float>(), g.stride(0), static_cast<T*>(grad_logits.data_ptr()),
            grad_logits.stride(0), grad_logits.stride(1));
    nu::check_launch();
  });
}

}  // namespace tessera::kernels::cuda

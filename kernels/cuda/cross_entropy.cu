// CUDA cross-entropy fused with log-softmax: launchers and thin kernels over the bodies in
// cross_entropy_body.cuh. The forward gives each row a block that reads the logits once; the
// backward writes softmax minus the smoothed one-hot straight into grad_logits (which may be the
// logits themselves). Logits are read through their strides, never copied. Targets outside [0, V)
// that are not ignore_index (the CPU kernel throws for them) give NaN losses and gradients instead
// of a host round trip.
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/cross_entropy_body.cuh"
#include "kernels/cuda/nn_util.cuh"

namespace tessera::kernels::cuda {
namespace {

namespace nu = nn_util;
namespace body = cross_entropy_body;
using body::RowIo;

template <typename T>
__global__ void cross_entropy_forward_kernel(const T* logits, RowIo io, float* losses,
                                             int64_t loss_stride, float* lse, int64_t lse_stride) {
  __shared__ __align__(16) unsigned char shared[body::kForwardSharedBytes];
  body::Forward<T>::run(logits, io, losses, loss_stride, lse, lse_stride, blockDim.x, gridDim.x,
                        blockIdx.x, threadIdx.x, shared);
}

template <typename T>
__global__ void cross_entropy_backward_kernel(const T* logits, RowIo io, const float* lse,
                                              int64_t lse_stride, const float* grad,
                                              int64_t grad_stride, T* out, int64_t out_row_stride,
                                              int64_t out_col_stride) {
  body::Backward<T>::run(logits, io, lse, lse_stride, grad, grad_stride, out, out_row_stride,
                         out_col_stride, gridDim.x, blockIdx.x, threadIdx.x);
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
  return RowIo{logits.size(0),          logits.size(1),    logits.stride(0), logits.stride(1),
               targets.data<int64_t>(), targets.stride(0), ignore_index,     float(smoothing)};
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
  const int threads = body::forward_threads(V);
  const unsigned blocks = unsigned(body::forward_blocks(N));
  dispatch_floating(logits.dtype(), op, [&]<typename T>() {
    cross_entropy_forward_kernel<T><<<blocks, threads, 0, nu::stream_for(logits)>>>(
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
  const unsigned blocks = unsigned(body::backward_blocks(N, V));
  dispatch_floating(logits.dtype(), op, [&]<typename T>() {
    cross_entropy_backward_kernel<T><<<blocks, body::kBackwardThreads, 0, nu::stream_for(logits)>>>(
        static_cast<const T*>(logits.data_ptr()), io, lse.data<float>(), lse.stride(0),
        g.data<float>(), g.stride(0), static_cast<T*>(grad_logits.data_ptr()),
        grad_logits.stride(0), grad_logits.stride(1));
    nu::check_launch();
  });
}

}  // namespace tessera::kernels::cuda

// CUDA dropout: one thread per element over the flat row-major index, the keep test of
// kernels/dropout_math.h on philox(seed, offset + i), so a (seed, offset) draws the same mask as
// the CPU kernel, bit for bit, whatever the launch shape. The body is in dropout_body.cuh.
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/dropout_body.cuh"
#include "kernels/cuda/nn_util.cuh"
#include "kernels/dropout_math.h"

namespace tessera::kernels::cuda {
namespace {

namespace nu = nn_util;

template <typename T>
__global__ void dropout_kernel(const T* x, T* out, int64_t n, uint64_t seed, uint64_t offset,
                               uint32_t threshold, float scale) {
  dropout_body::dropout(x, out, n, seed, offset, threshold, scale, blockIdx.x, gridDim.x,
                        threadIdx.x, blockDim.x);
}

}  // namespace

void dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset, const Tensor& out) {
  const char* op = "dropout";
  TS_CHECK(x.shape() == out.shape() && x.dtype() == out.dtype() && x.device() == out.device(), op,
           "expected out like x, got x ", x.describe(), " and out ", out.describe());
  TS_CHECK(p >= 0.0 && p <= 1.0, op, "expected p in [0, 1], got ", p);
  const int64_t n = x.numel();
  if (n == 0) return;
  nu::DeviceGuard guard(x.device());
  const Tensor xc = x.contiguous();
  const Tensor oc = nu::contiguous_output(out);
  const uint32_t threshold = dropout_threshold(p);
  const float scale = dropout_scale(p);
  constexpr int kThreads = dropout_body::kThreads;
  dispatch_floating(x.dtype(), op, [&]<typename T>() {
    dropout_kernel<T><<<dropout_body::grid_for(n), kThreads, 0, nu::stream_for(x)>>>(
        static_cast<const T*>(xc.data_ptr()), static_cast<T*>(oc.data_ptr()), n, seed, offset,
        threshold, scale);
    nu::check_launch();
  });
  nu::finish_output(oc, out);
}

}  // namespace tessera::kernels::cuda

// CUDA dropout: one thread per element over the flat row-major index, the keep test of
// kernels/dropout_math.h on philox(seed, offset + i), so a (seed, offset) draws the same mask as the
// CPU kernel, bit for bit, whatever the launch shape.
#include "kernels/cuda/dropout.h"

#include "kernels/cuda/nn_util.cuh"
#include "kernels/dropout_math.h"

namespace tessera::kernels::cuda {
namespace {

namespace nu = nn_util;

// x, out: (n) contiguous. out may alias x.
template <typename T>
__global__ void dropout_kernel(const T* x, T* out, int64_t n, uint64_t seed, uint64_t offset,
                               uint32_t threshold, float scale) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    // The same expression as the CPU loop, so kept values round identically.
    out[i] = dropout_keep(seed, offset + uint64_t(i), threshold) ? T(float(x[i]) * scale) : T(0.0f);
  }
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
  constexpr int kThreads = 256;
  dispatch_floating(x.dtype(), op, [&]<typename T>() {
    dropout_kernel<T><<<nu::grid_for(n, kThreads, 1 << 20), kThreads, 0, nu::stream_for(x)>>>(
        static_cast<const T*>(xc.data_ptr()), static_cast<T*>(oc.data_ptr()), n, seed, offset,
        threshold, scale);
    nu::check_launch();
  });
  nu::finish_output(oc, out);
}

}  // namespace tessera::kernels::cuda

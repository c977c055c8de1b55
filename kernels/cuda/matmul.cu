// The unfused linear epilogue on CUDA: out = act(out + bias) element-wise, with the GELU of
// kernels/math.h so the result matches the CPU's composed ops.
#include <cuda_runtime.h>

#include <algorithm>

#include "core/cuda/device_guard.h"
#include "core/cuda/runtime.h"
#include "core/half.h"
#include "kernels/cuda/matmul.h"
#include "kernels/math.h"

namespace tessera::kernels::cuda::detail {
namespace {

constexpr int kThreads = 256;

// Grid-stride over the (rows, cols) elements of out; bias may be null.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    bias_activation_kernel(T* out, int64_t rows, int64_t cols, int64_t rs, int64_t cs, const T* bias, bool gelu) {
  const int64_t n = rows * cols;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < n; i += int64_t(gridDim.x) * kThreads) {
    const int64_t r = i / cols, c = i % cols;
    T* p = out + r * rs + c * cs;
    float v = float(*p);
    if (bias != nullptr) v += float(bias[c]);
    if (gelu) v = math::gelu_tanh(v);
    *p = T(v);
  }
}

template <typename T>
void launch(const Tensor& out, const Tensor& bias, Activation act) {
  const int64_t rows = out.size(0), cols = out.size(1), n = rows * cols;
  const unsigned blocks = unsigned(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, 65536));
  bias_activation_kernel<T><<<blocks, kThreads, 0, ::tessera::cuda::current_stream(out.device().index)>>>(
      static_cast<T*>(out.data_ptr()), rows, cols, out.stride(0), out.stride(1),
      bias.defined() ? static_cast<const T*>(bias.data_ptr()) : nullptr, act == Activation::gelu_tanh);
  TS_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void bias_activation(const Tensor& out, const Tensor& bias, Activation act) {
  TS_CHECK(out.dim() == 2 && (!bias.defined() || (bias.dim() == 1 && bias.size(0) == out.size(1) &&
                                                  (bias.size(0) <= 1 || bias.stride(0) == 1))),
           "linear", "expected out (M, N) and a contiguous bias (N), got ", out.describe(),
           bias.defined() ? " and " + bias.describe() : std::string());
  if (out.numel() == 0 || (!bias.defined() && act == Activation::none)) return;
  ::tessera::cuda::DeviceGuard guard(out.device().index);
  switch (out.dtype()) {
    case DType::f32: return launch<float>(out, bias, act);
    case DType::f16: return launch<Half>(out, bias, act);
    default: return launch<BFloat16>(out, bias, act);
  }
}

}  // namespace tessera::kernels::cuda::detail

// CUDA attention forward, flash style, on f32 FMAs (f16 and bf16 go to the tensor-core kernels of
// attention_mma_body.cuh unless TESSERA_ATTENTION_TENSOR_CORES=0): one block per (batch, head,
// 32-query tile) keeps its queries in shared memory and runs an online softmax over 32-key tiles of
// K and V; each query row keeps its running max m and sum l, and its output accumulator (f32
// registers) is rescaled when m grows.
#include <cuda_runtime.h>

#include <cmath>

#include "core/cuda/device_guard.h"
#include "core/cuda/runtime.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_common.h"
#include "kernels/cuda/attention_fma_body.cuh"
#include "kernels/cuda/attention_mma_launch.h"
#include "kernels/cuda/attention_tile.cuh"

namespace tessera::kernels::cuda {
namespace {

using namespace attention_detail;

template <typename T, int D>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(Problem p, Operand q, Operand k, Operand v, Operand out, RowOperand lse,
                   int64_t q_tiles) {
  extern __shared__ float smem[];
  forward_body<T, D>(p, q, k, v, out, lse, q_tiles, blockIdx.x, threadIdx.x, smem);
}

template <typename T, int D>
void launch_forward(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v,
                    const Tensor& out, const Tensor& lse) {
  const int64_t q_tiles = (p.T + kBlockQ - 1) / kBlockQ;
  const int64_t blocks = p.B * p.H * q_tiles;
  TS_CHECK(blocks <= 0x7FFFFFFF, "attention_forward",
           "expected at most 2^31 - 1 (batch, head, query tile) ", "blocks, got ", blocks,
           " for q ", q.describe());
  const size_t bytes = forward_shared_floats<D>() * sizeof(float);
  auto kernel = forward_kernel<T, D>;
  allow_shared_bytes(kernel, bytes);
  kernel<<<unsigned(blocks), kThreads, bytes, ::tessera::cuda::current_stream(q.device().index)>>>(
      p, operand(q), operand(k), operand(v), operand(out), row_operand(lse), q_tiles);
  TS_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void launch_forward_dtype(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v,
                          const Tensor& out, const Tensor& lse) {
  switch (p.D) {
    case 32:
      return launch_forward<T, 32>(p, q, k, v, out, lse);
    case 64:
      return launch_forward<T, 64>(p, q, k, v, out, lse);
    default:
      return launch_forward<T, 128>(p, q, k, v, out, lse);
  }
}

}  // namespace

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& key_padding_mask, const AttentionOptions& opts,
                       const Tensor& out, const Tensor& lse) {
  constexpr const char* kOp = "attention_forward";
  const Problem p = make_problem(kOp, q, k, v, key_padding_mask, opts);
  check_tensor(kOp, "out", out, q, q.shape(), q.dtype());
  check_tensor(kOp, "lse", lse, q, {p.B, p.H, p.T}, DType::f32);
  if (p.B * p.H * p.T == 0) return;
  ::tessera::cuda::DeviceGuard guard(q.device().index);
  if (attention_mma::enabled(q.dtype())) {
    return attention_mma::forward(p, q, k, v, out, lse,
                                  ::tessera::cuda::current_stream(q.device().index));
  }
  switch (q.dtype()) {
    case DType::f32:
      return launch_forward_dtype<float>(p, q, k, v, out, lse);
    case DType::f16:
      return launch_forward_dtype<Half>(p, q, k, v, out, lse);
    default:
      return launch_forward_dtype<BFloat16>(p, q, k, v, out, lse);
  }
}

}  // namespace tessera::kernels::cuda

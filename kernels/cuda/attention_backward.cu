// CUDA attention backward, flash style, without atomics: a row pass computes D = rowsum(dO * O) and
// the lse to subtract; then one kernel per (head, 32-key tile) loops over query tiles for dK and
// dV, and one per (head, 32-query tile) loops over key tiles for dQ. Both recompute the
// probabilities P = exp(scale * q.k - lse) tile by tile, so no (T, S) matrix exists.
#include <cuda_runtime.h>

#include <cmath>

#include "core/cuda/device_guard.h"
#include "core/cuda/runtime.h"
#include "core/factory.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_common.h"
#include "kernels/cuda/attention_fma_body.cuh"
#include "kernels/cuda/attention_mma_launch.h"
#include "kernels/cuda/attention_row_stats_body.cuh"
#include "kernels/cuda/attention_tile.cuh"

namespace tessera::kernels::cuda {
namespace {

using namespace attention_detail;

template <typename T>
__global__ void __launch_bounds__(kThreads)
    row_stats_kernel(Problem p, Operand out, Operand grad_out, RowOperand lse, float* delta,
                     float* lse_use) {
  row_stats<T>(p, out, grad_out, lse, delta, lse_use, blockIdx.x, threadIdx.x);
}
template <typename T, int D>
__global__ void __launch_bounds__(kThreads)
    dkdv_kernel(Problem p, Operand q, Operand k, Operand v, Operand grad_out, const float* delta,
                const float* lse_use, Operand grad_k, Operand grad_v, int64_t k_tiles) {
  extern __shared__ float smem[];
  dkdv_body<T, D>(p, q, k, v, grad_out, delta, lse_use, grad_k, grad_v, k_tiles, blockIdx.x,
                  threadIdx.x, smem);
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads)
    dq_kernel(Problem p, Operand q, Operand k, Operand v, Operand grad_out, const float* delta,
              const float* lse_use, Operand grad_q, int64_t q_tiles) {
  extern __shared__ float smem[];
  dq_body<T, D>(p, q, k, v, grad_out, delta, lse_use, grad_q, q_tiles, blockIdx.x, threadIdx.x,
                smem);
}

struct Grads {
  const Tensor& q;
  const Tensor& k;
  const Tensor& v;
};

template <typename T, int D>
void launch_backward(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v,
                     const Tensor& grad_out, const float* delta, const float* lse_use,
                     const Grads& g, cudaStream_t stream) {
  const size_t bytes = backward_shared_floats<D>() * sizeof(float);
  const int64_t k_tiles = (p.S + kBlockK - 1) / kBlockK, q_tiles = (p.T + kBlockQ - 1) / kBlockQ;
  const int64_t kv_blocks = p.B * p.H * k_tiles, q_blocks = p.B * p.H * q_tiles;
  TS_CHECK(kv_blocks <= 0x7FFFFFFF && q_blocks <= 0x7FFFFFFF, "attention_backward",
           "expected at most 2^31 - 1 tiles, got ", kv_blocks, " key and ", q_blocks,
           " query tiles for q ", q.describe());
  if (kv_blocks > 0) {
    auto kernel = dkdv_kernel<T, D>;
    allow_shared_bytes(kernel, bytes);
    kernel<<<unsigned(kv_blocks), kThreads, bytes, stream>>>(p, operand(q), operand(k), operand(v),
                                                             operand(grad_out), delta, lse_use,
                                                             operand(g.k), operand(g.v), k_tiles);
    TS_CUDA_CHECK(cudaGetLastError());
  }
  if (q_blocks > 0) {
    auto kernel = dq_kernel<T, D>;
    allow_shared_bytes(kernel, bytes);
    kernel<<<unsigned(q_blocks), kThreads, bytes, stream>>>(p, operand(q), operand(k), operand(v),
                                                            operand(grad_out), delta, lse_use,
                                                            operand(g.q), q_tiles);
    TS_CUDA_CHECK(cudaGetLastError());
  }
}

template <typename T>
void run_backward(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v,
                  const Tensor& out, const Tensor& lse, const Tensor& grad_out, const Grads& g) {
  const cudaStream_t stream = ::tessera::cuda::current_stream(q.device().index);
  // Dense (B, H, T) f32 statistics; T > 0 here, so the row pass has work.
  const TensorOptions f32{.dtype = DType::f32, .device = q.device()};
  const Tensor delta = empty({p.B, p.H, p.T}, f32), lse_use = empty({p.B, p.H, p.T}, f32);
  float* delta_p = static_cast<float*>(delta.data_ptr());
  float* lse_use_p = static_cast<float*>(lse_use.data_ptr());
  const int64_t row_blocks = row_stats_blocks(p);
  TS_CHECK(row_blocks <= 0x7FFFFFFF, "attention_backward", "expected fewer rows, got q ",
           q.describe());
  row_stats_kernel<T><<<unsigned(row_blocks), kThreads, 0, stream>>>(
      p, operand(out), operand(grad_out), row_operand(lse), delta_p, lse_use_p);
  TS_CUDA_CHECK(cudaGetLastError());
  if (attention_mma::enabled(q.dtype())) {
    return attention_mma::backward(p, q, k, v, grad_out, delta_p, lse_use_p, g.q, g.k, g.v, stream);
  }
  switch (p.D) {
    case 32:
      return launch_backward<T, 32>(p, q, k, v, grad_out, delta_p, lse_use_p, g, stream);
    case 64:
      return launch_backward<T, 64>(p, q, k, v, grad_out, delta_p, lse_use_p, g, stream);
    default:
      return launch_backward<T, 128>(p, q, k, v, grad_out, delta_p, lse_use_p, g, stream);
  }
}

}  // namespace

void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& lse, const Tensor& grad_out, const Tensor& key_padding_mask,
                        const AttentionOptions& opts, const Tensor& grad_q, const Tensor& grad_k,
                        const Tensor& grad_v) {
  constexpr const char* kOp = "attention_backward";
  const Problem p = make_problem(kOp, q, k, v, key_padding_mask, opts);
  check_tensor(kOp, "out", out, q, q.shape(), q.dtype());
  check_tensor(kOp, "grad_out", grad_out, q, q.shape(), q.dtype());
  check_tensor(kOp, "lse", lse, q, {p.B, p.H, p.T}, DType::f32);
  check_tensor(kOp, "grad_q", grad_q, q, q.shape(), q.dtype());
  check_tensor(kOp, "grad_k", grad_k, q, k.shape(), q.dtype());
  check_tensor(kOp, "grad_v", grad_v, q, k.shape(), q.dtype());
  if (p.B * p.H == 0) return;
  ::tessera::cuda::DeviceGuard guard(q.device().index);
  if (p.T == 0) {  // no query sees any key: dK = dV = 0
    if (p.S > 0) {
      grad_k.zero_();
      grad_v.zero_();
    }
    return;
  }
  const Grads g{grad_q, grad_k, grad_v};
  switch (q.dtype()) {
    case DType::f32:
      return run_backward<float>(p, q, k, v, out, lse, grad_out, g);
    case DType::f16:
      return run_backward<Half>(p, q, k, v, out, lse, grad_out, g);
    default:
      return run_backward<BFloat16>(p, q, k, v, out, lse, grad_out, g);
  }
}

}  // namespace tessera::kernels::cuda

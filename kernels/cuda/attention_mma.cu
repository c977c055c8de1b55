// CUDA kernels and launchers of the tensor-core attention (bodies in attention_mma_body.cuh).
#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>

#include "core/cuda/runtime.h"
#include "kernels/cuda/attention_mma_body.cuh"
#include "kernels/cuda/attention_mma_launch.h"
#include "kernels/cuda/attention_tile.cuh"

namespace tessera::kernels::cuda::attention_mma {
namespace {

using attention_detail::allow_shared_bytes;
using attention_detail::operand;
using attention_detail::row_operand;

template <typename T, int D>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(Problem p, Operand q, Operand k, Operand v, Operand out, RowOperand lse,
                   int64_t q_tiles) {
  extern __shared__ __align__(16) unsigned char shared[];
  Forward<T, D>::run(p, q, k, v, out, lse, q_tiles, blockIdx.x, threadIdx.x, shared);
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads)
    backward_kv_kernel(Problem p, Operand q, Operand k, Operand v, Operand grad_out,
                       const float* delta, const float* lse_use, Operand grad_k, Operand grad_v,
                       int64_t k_tiles) {
  extern __shared__ __align__(16) unsigned char shared[];
  BackwardKV<T, D>::run(p, q, k, v, grad_out, delta, lse_use, grad_k, grad_v, k_tiles, blockIdx.x,
                        threadIdx.x, shared);
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads)
    backward_q_kernel(Problem p, Operand q, Operand k, Operand v, Operand grad_out,
                      const float* delta, const float* lse_use, Operand grad_q, int64_t q_tiles) {
  extern __shared__ __align__(16) unsigned char shared[];
  BackwardQ<T, D>::run(p, q, k, v, grad_out, delta, lse_use, grad_q, q_tiles, blockIdx.x,
                       threadIdx.x, shared);
}

int64_t tiles(int64_t n) { return (n + kTile - 1) / kTile; }

unsigned grid(const char* op, int64_t blocks, const Tensor& q) {
  TS_CHECK(blocks <= 0x7FFFFFFF, op, "expected at most 2^31 - 1 (batch, head, tile) blocks, got ",
           blocks, " for q ", q.describe());
  return unsigned(blocks);
}

template <typename T, int D>
void launch_forward(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v,
                    const Tensor& out, const Tensor& lse, cudaStream_t stream) {
  const int64_t q_tiles = tiles(p.T);
  const unsigned blocks = grid("attention_forward", p.B * p.H * q_tiles, q);
  auto kernel = forward_kernel<T, D>;
  allow_shared_bytes(kernel, Forward<T, D>::kSharedBytes);
  kernel<<<blocks, kThreads, Forward<T, D>::kSharedBytes, stream>>>(
      p, operand(q), operand(k), operand(v), operand(out), row_operand(lse), q_tiles);
  TS_CUDA_CHECK(cudaGetLastError());
}

template <typename T, int D>
void launch_backward(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v,
                     const Tensor& grad_out, const float* delta, const float* lse_use,
                     const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v,
                     cudaStream_t stream) {
  const int64_t k_tiles = tiles(p.S), q_tiles = tiles(p.T);
  if (k_tiles > 0) {
    const unsigned blocks = grid("attention_backward", p.B * p.H * k_tiles, q);
    auto kernel = backward_kv_kernel<T, D>;
    allow_shared_bytes(kernel, BackwardKV<T, D>::kSharedBytes);
    kernel<<<blocks, kThreads, BackwardKV<T, D>::kSharedBytes, stream>>>(
        p, operand(q), operand(k), operand(v), operand(grad_out), delta, lse_use, operand(grad_k),
        operand(grad_v), k_tiles);
    TS_CUDA_CHECK(cudaGetLastError());
  }
  if (q_tiles > 0) {
    const unsigned blocks = grid("attention_backward", p.B * p.H * q_tiles, q);
    auto kernel = backward_q_kernel<T, D>;
    allow_shared_bytes(kernel, BackwardQ<T, D>::kSharedBytes);
    kernel<<<blocks, kThreads, BackwardQ<T, D>::kSharedBytes, stream>>>(
        p, operand(q), operand(k), operand(v), operand(grad_out), delta, lse_use, operand(grad_q),
        q_tiles);
    TS_CUDA_CHECK(cudaGetLastError());
  }
}

// Calls fn.template operator()<T, D>() for the problem's 16-bit dtype and head dim.
template <typename Fn>
void dispatch(DType dtype, int d, Fn&& fn) {
  auto by_dim = [&]<typename T>() {
    switch (d) {
      case 32:
        return fn.template operator()<T, 32>();
      case 64:
        return fn.template operator()<T, 64>();
      default:
        return fn.template operator()<T, 128>();
    }
  };
  if (dtype == DType::f16) return by_dim.template operator()<Half>();
  return by_dim.template operator()<BFloat16>();
}

}  // namespace

bool enabled(DType dtype) {
  if (dtype != DType::f16 && dtype != DType::bf16) return false;
  const char* env = std::getenv("TESSERA_ATTENTION_TENSOR_CORES");
  return env == nullptr || std::strcmp(env, "0") != 0;
}

void forward(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
             const Tensor& lse, cudaStream_t stream) {
  dispatch(q.dtype(), p.D,
           [&]<typename T, int D>() { launch_forward<T, D>(p, q, k, v, out, lse, stream); });
}

void backward(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v,
              const Tensor& grad_out, const float* delta, const float* lse_use,
              const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v,
              cudaStream_t stream) {
  dispatch(q.dtype(), p.D, [&]<typename T, int D>() {
    launch_backward<T, D>(p, q, k, v, grad_out, delta, lse_use, grad_q, grad_k, grad_v, stream);
  });
}

}  // namespace tessera::kernels::cuda::attention_mma

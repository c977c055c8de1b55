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
#include "kernels/cuda/attention_mma_launch.h"
#include "kernels/cuda/attention_tile.cuh"

namespace tessera::kernels::cuda {
namespace {

using namespace attention_detail;

template <int D>
constexpr size_t forward_shared_floats() {
  // q, k, v tiles; the score / probability tile; per-row m, l and correction.
  return size_t(kBlockQ + 2 * kBlockK) * kLd<D> + size_t(kBlockQ) * (kBlockK + 1) + 3 * kBlockQ;
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(Problem p, Operand q, Operand k, Operand v, Operand out, RowOperand lse,
                   int64_t q_tiles) {
  constexpr int kLdS = kBlockK + 1;
  constexpr int kRowGroups = kThreads / D;              // output rows handled side by side
  constexpr int kRowsPerThread = kBlockQ / kRowGroups;  // output rows per thread
  constexpr float kNegInf = -INFINITY;
  extern __shared__ float smem[];
  float* qs = smem;                    // (kBlockQ, D)
  float* ks = qs + kBlockQ * kLd<D>;   // (kBlockK, D)
  float* vs = ks + kBlockK * kLd<D>;   // (kBlockK, D)
  float* ps = vs + kBlockK * kLd<D>;   // (kBlockQ, kBlockK) scores, then probabilities
  float* row_m = ps + kBlockQ * kLdS;  // (kBlockQ)
  float* row_l = row_m + kBlockQ;      // (kBlockQ)
  float* corr = row_l + kBlockQ;       // (kBlockQ)

  const int64_t bh = int64_t(blockIdx.x) / q_tiles;
  const int64_t t0 = (int64_t(blockIdx.x) % q_tiles) * kBlockQ;
  const int64_t b = bh / p.H, h = bh % p.H;
  const int nq = int(p.T - t0 < kBlockQ ? p.T - t0 : kBlockQ);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int col = tid % D, row0 = tid / D;

  load_rows<T, D, kBlockQ>(q, b, h, t0, nq, qs);
  if (tid < kBlockQ) {
    row_m[tid] = kNegInf;
    row_l[tid] = 0.0f;
  }
  float acc[kRowsPerThread];
#pragma unroll
  for (int r = 0; r < kRowsPerThread; ++r) acc[r] = 0.0f;

  const int64_t end = key_end(p, t0, nq);
  for (int64_t s0 = 0; s0 < end; s0 += kBlockK) {
    const int nk = int(end - s0 < kBlockK ? end - s0 : kBlockK);
    __syncthreads();  // the previous tile's k, v and probabilities are consumed
    load_rows<T, D, kBlockK>(k, b, h, s0, nk, ks);
    load_rows<T, D, kBlockK>(v, b, h, s0, nk, vs);
    __syncthreads();

    // Scores: lane = key, each warp a strided set of query rows.
    const int64_t s = s0 + lane;
    for (int i = warp; i < kBlockQ; i += kWarps) {
      float dot = 0.0f;
#pragma unroll 8
      for (int c = 0; c < D; ++c) dot += qs[i * kLd<D> + c] * ks[lane * kLd<D> + c];
      const bool vis = i < nq && lane < nk && visible(p, b, t0 + i, s);
      ps[i * kLdS + lane] = vis ? dot * p.scale : kNegInf;
    }
    __syncthreads();

    // Online softmax, one warp per row; masked entries are -inf and give probability 0.
    for (int i = warp; i < kBlockQ; i += kWarps) {
      const float m_old = row_m[i];
      const float sv = ps[i * kLdS + lane];
      const float m_new = fmaxf(m_old, warp_max(sv));
      // A row that has seen no visible key yet subtracts 0: exp(-inf - 0) = 0, never NaN.
      const float m_use = m_new == kNegInf ? 0.0f : m_new;
      float pv = expf(sv - m_use);
      const float sum = warp_sum(pv);
      if (p.dropout_p > 0.0f && pv != 0.0f) pv *= dropout_factor(p, bh, t0 + i, s);  // l keeps all
      ps[i * kLdS + lane] = pv;
      __syncwarp();  // every lane has read row_m[i] before lane 0 replaces it
      if (lane == 0) {
        const float c = expf(m_old - m_use);
        row_l[i] = row_l[i] * c + sum;
        row_m[i] = m_new;
        corr[i] = c;
      }
    }
    __syncthreads();

    // O (kBlockQ, D) = O * corr + P V
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      const int i = row0 + r * kRowGroups;
      float a = acc[r] * corr[i];
      for (int j = 0; j < nk; ++j) a += ps[i * kLdS + j] * vs[j * kLd<D> + col];
      acc[r] = a;
    }
  }
  __syncthreads();

  // Normalise; a query with no visible key has l = 0: zeros and lse = -inf.
  T* o = static_cast<T*>(out.data) + b * out.sb + h * out.sh;
#pragma unroll
  for (int r = 0; r < kRowsPerThread; ++r) {
    const int i = row0 + r * kRowGroups;
    if (i < nq) {
      const float l = row_l[i];
      o[(t0 + i) * out.sl + int64_t(col) * out.sd] = T(l > 0.0f ? acc[r] / l : 0.0f);
    }
  }
  if (tid < nq) {
    const float l = row_l[tid];
    float* ls = static_cast<float*>(lse.data) + b * lse.sb + h * lse.sh;
    ls[(t0 + tid) * lse.st] = l > 0.0f ? row_m[tid] + logf(l) : kNegInf;
  }
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

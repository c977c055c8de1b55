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
// Per-query statistics of rows [t0, t0 + n) of head bh into shared memory; rows past n get lse
// +inf (probability 0) and delta 0.
__device__ __forceinline__ void load_stats(const Problem& p, int64_t bh, int64_t t0, int n,
                                           const float* delta, const float* lse_use, float* delta_s,
                                           float* lse_s) {
  for (int i = threadIdx.x; i < kBlockQ; i += kThreads) {
    delta_s[i] = i < n ? delta[bh * p.T + t0 + i] : 0.0f;
    lse_s[i] = i < n ? lse_use[bh * p.T + t0 + i] : INFINITY;
  }
}

template <int D>
constexpr size_t backward_shared_floats() {
  // q, dO, k, v tiles; two (32, 32) tiles; per-query delta and lse.
  return size_t(2 * kBlockQ + 2 * kBlockK) * kLd<D> + 2 * size_t(kBlockQ) * (kBlockQ + 1) +
         2 * kBlockQ;
}

// dK and dV of keys [s0, s0 + 32) of one head, against every query that may see them. Tiles are
// (keys, queries): lane = query, each warp a strided set of keys.
template <typename T, int D>
__global__ void __launch_bounds__(kThreads)
    dkdv_kernel(Problem p, Operand q, Operand k, Operand v, Operand grad_out, const float* delta,
                const float* lse_use, Operand grad_k, Operand grad_v, int64_t k_tiles) {
  constexpr int kLdP = kBlockQ + 1;
  constexpr int kRowGroups = kThreads / D;
  constexpr int kRowsPerThread = kBlockK / kRowGroups;
  extern __shared__ float smem[];
  float* qs = smem;                      // (kBlockQ, D)
  float* dos = qs + kBlockQ * kLd<D>;    // (kBlockQ, D)
  float* ks = dos + kBlockQ * kLd<D>;    // (kBlockK, D)
  float* vs = ks + kBlockK * kLd<D>;     // (kBlockK, D)
  float* pd = vs + kBlockK * kLd<D>;     // (kBlockK, kBlockQ) dropped probabilities P * factor
  float* ds = pd + kBlockK * kLdP;       // (kBlockK, kBlockQ) dS = P * (dP * factor - delta)
  float* delta_s = ds + kBlockK * kLdP;  // (kBlockQ)
  float* lse_s = delta_s + kBlockQ;      // (kBlockQ)

  const int64_t bh = int64_t(blockIdx.x) / k_tiles;
  const int64_t s0 = (int64_t(blockIdx.x) % k_tiles) * kBlockK;
  const int64_t b = bh / p.H, h = bh % p.H;
  const int nk = int(p.S - s0 < kBlockK ? p.S - s0 : kBlockK);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int col = tid % D, row0 = tid / D;

  load_rows<T, D, kBlockK>(k, b, h, s0, nk, ks);
  load_rows<T, D, kBlockK>(v, b, h, s0, nk, vs);
  float dk[kRowsPerThread], dv[kRowsPerThread];
#pragma unroll
  for (int r = 0; r < kRowsPerThread; ++r) dk[r] = dv[r] = 0.0f;

  for (int64_t t0 = query_begin(p, s0); t0 < p.T; t0 += kBlockQ) {
    const int nq = int(p.T - t0 < kBlockQ ? p.T - t0 : kBlockQ);
    __syncthreads();  // the previous query tile is consumed
    load_rows<T, D, kBlockQ>(q, b, h, t0, nq, qs);
    load_rows<T, D, kBlockQ>(grad_out, b, h, t0, nq, dos);
    load_stats(p, bh, t0, nq, delta, lse_use, delta_s, lse_s);
    __syncthreads();

    const int i = lane;  // query of this lane
    const int64_t t = t0 + i;
    for (int j = warp; j < kBlockK; j += kWarps) {
      float sdot = 0.0f, pdot = 0.0f;
#pragma unroll 8
      for (int c = 0; c < D; ++c) {
        sdot += ks[j * kLd<D> + c] * qs[i * kLd<D> + c];
        pdot += vs[j * kLd<D> + c] * dos[i * kLd<D> + c];
      }
      const bool vis = i < nq && j < nk && visible(p, b, t, s0 + j);
      const float prob = vis ? expf(sdot * p.scale - lse_s[i]) : 0.0f;
      const float f = (p.dropout_p > 0.0f && vis) ? dropout_factor(p, bh, t, s0 + j) : 1.0f;
      pd[j * kLdP + i] = prob * f;
      ds[j * kLdP + i] = prob * (pdot * f - delta_s[i]);
    }
    __syncthreads();

    // dV (keys, D) += P_dropped dO;  dK (keys, D) += dS Q  (scale applied at the end)
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      const int j = row0 + r * kRowGroups;
      float av = dv[r], ak = dk[r];
      for (int ii = 0; ii < nq; ++ii) {
        av += pd[j * kLdP + ii] * dos[ii * kLd<D> + col];
        ak += ds[j * kLdP + ii] * qs[ii * kLd<D> + col];
      }
      dv[r] = av;
      dk[r] = ak;
    }
  }

  T* gk = static_cast<T*>(grad_k.data) + b * grad_k.sb + h * grad_k.sh;
  T* gv = static_cast<T*>(grad_v.data) + b * grad_v.sb + h * grad_v.sh;
#pragma unroll
  for (int r = 0; r < kRowsPerThread; ++r) {
    const int j = row0 + r * kRowGroups;
    if (j < nk) {
      gk[(s0 + j) * grad_k.sl + int64_t(col) * grad_k.sd] = T(dk[r] * p.scale);
      gv[(s0 + j) * grad_v.sl + int64_t(col) * grad_v.sd] = T(dv[r]);
    }
  }
}

// dQ of queries [t0, t0 + 32) of one head, over every key they may see. Tiles are (queries, keys):
// lane = key, each warp a strided set of queries.
template <typename T, int D>
__global__ void __launch_bounds__(kThreads)
    dq_kernel(Problem p, Operand q, Operand k, Operand v, Operand grad_out, const float* delta,
              const float* lse_use, Operand grad_q, int64_t q_tiles) {
  constexpr int kLdS = kBlockK + 1;
  constexpr int kRowGroups = kThreads / D;
  constexpr int kRowsPerThread = kBlockQ / kRowGroups;
  extern __shared__ float smem[];
  float* qs = smem;                          // (kBlockQ, D)
  float* dos = qs + kBlockQ * kLd<D>;        // (kBlockQ, D)
  float* ks = dos + kBlockQ * kLd<D>;        // (kBlockK, D)
  float* vs = ks + kBlockK * kLd<D>;         // (kBlockK, D)
  float* ds = vs + kBlockK * kLd<D>;         // (kBlockQ, kBlockK) dS
  float* delta_s = ds + 2 * kBlockQ * kLdS;  // (kBlockQ); layout matches backward_shared_floats
  float* lse_s = delta_s + kBlockQ;          // (kBlockQ)

  const int64_t bh = int64_t(blockIdx.x) / q_tiles;
  const int64_t t0 = (int64_t(blockIdx.x) % q_tiles) * kBlockQ;
  const int64_t b = bh / p.H, h = bh % p.H;
  const int nq = int(p.T - t0 < kBlockQ ? p.T - t0 : kBlockQ);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int col = tid % D, row0 = tid / D;

  load_rows<T, D, kBlockQ>(q, b, h, t0, nq, qs);
  load_rows<T, D, kBlockQ>(grad_out, b, h, t0, nq, dos);
  load_stats(p, bh, t0, nq, delta, lse_use, delta_s, lse_s);
  float dq[kRowsPerThread];
#pragma unroll
  for (int r = 0; r < kRowsPerThread; ++r) dq[r] = 0.0f;

  const int64_t end = key_end(p, t0, nq);
  for (int64_t s0 = 0; s0 < end; s0 += kBlockK) {
    const int nk = int(end - s0 < kBlockK ? end - s0 : kBlockK);
    __syncthreads();  // the previous key tile is consumed
    load_rows<T, D, kBlockK>(k, b, h, s0, nk, ks);
    load_rows<T, D, kBlockK>(v, b, h, s0, nk, vs);
    __syncthreads();

    const int j = lane;  // key of this lane
    const int64_t s = s0 + j;
    for (int i = warp; i < kBlockQ; i += kWarps) {
      float sdot = 0.0f, pdot = 0.0f;
#pragma unroll 8
      for (int c = 0; c < D; ++c) {
        sdot += qs[i * kLd<D> + c] * ks[j * kLd<D> + c];
        pdot += dos[i * kLd<D> + c] * vs[j * kLd<D> + c];
      }
      const bool vis = i < nq && j < nk && visible(p, b, t0 + i, s);
      const float prob = vis ? expf(sdot * p.scale - lse_s[i]) : 0.0f;
      const float f = (p.dropout_p > 0.0f && vis) ? dropout_factor(p, bh, t0 + i, s) : 1.0f;
      ds[i * kLdS + j] = prob * (pdot * f - delta_s[i]);
    }
    __syncthreads();

    // dQ (queries, D) += dS K  (scale applied at the end)
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      const int i = row0 + r * kRowGroups;
      float a = dq[r];
      for (int jj = 0; jj < nk; ++jj) a += ds[i * kLdS + jj] * ks[jj * kLd<D> + col];
      dq[r] = a;
    }
  }

  T* gq = static_cast<T*>(grad_q.data) + b * grad_q.sb + h * grad_q.sh;
#pragma unroll
  for (int r = 0; r < kRowsPerThread; ++r) {
    const int i = row0 + r * kRowGroups;
    if (i < nq) gq[(t0 + i) * grad_q.sl + int64_t(col) * grad_q.sd] = T(dq[r] * p.scale);
  }
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

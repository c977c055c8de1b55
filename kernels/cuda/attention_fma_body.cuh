// The f32-FMA attention kernels (f32 inputs, and 16-bit ones when the tensor cores are switched
// off) as portable bodies over simt.cuh: the forward over 32-query tiles with an online softmax,
// and the atomic-free backward (dK/dV per key tile, dQ per query tile). attention_forward.cu and
// attention_backward.cu run them as CUDA kernels; tests/kernels/emulated runs them on the CPU.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/half.h"
#include "kernels/cuda/attention_common.h"
#include "kernels/cuda/attention_mask.h"
#include "kernels/cuda/simt.cuh"

namespace tessera::kernels::cuda::attention_detail {

using simt::warp_max;
using simt::warp_sum;

// Shared-memory row stride of a (rows, D) tile: odd, so a warp reading one column of 32 rows hits
// 32 different banks.
template <int D>
inline constexpr int kLd = D + 1;

// Rows [l0, l0 + n) of head (b, h) of x into tile (kRows, D) with row stride kLd<D>, as f32; rows
// n..kRows are zero, so products over them add nothing (and never 0 * garbage = NaN).
template <typename T, int D, int kRows>
TS_SIMT void load_rows(const Operand& x, int64_t b, int64_t h, int64_t l0, int n, float* tile,
                       int tid) {
  const T* base = static_cast<const T*>(x.data) + b * x.sb + h * x.sh;
  for (int idx = tid; idx < kRows * D; idx += kThreads) {
    const int r = idx / D, c = idx % D;
    tile[r * kLd<D> + c] = r < n ? float(base[(l0 + r) * x.sl + int64_t(c) * x.sd]) : 0.0f;
  }
}

template <int D>
constexpr size_t forward_shared_floats() {
  // q, k, v tiles; the score / probability tile; per-row m, l and correction.
  return size_t(kBlockQ + 2 * kBlockK) * kLd<D> + size_t(kBlockQ) * (kBlockK + 1) + 3 * kBlockQ;
}

template <typename T, int D>
TS_SIMT void forward_body(const Problem& p, Operand q, Operand k, Operand v, Operand out,
                          RowOperand lse, int64_t q_tiles, int64_t block, int tid, float* smem) {
  constexpr int kLdS = kBlockK + 1;
  constexpr int kRowGroups = kThreads / D;              // output rows handled side by side
  constexpr int kRowsPerThread = kBlockQ / kRowGroups;  // output rows per thread
  constexpr float kNegInf = -INFINITY;
  float* qs = smem;                    // (kBlockQ, D)
  float* ks = qs + kBlockQ * kLd<D>;   // (kBlockK, D)
  float* vs = ks + kBlockK * kLd<D>;   // (kBlockK, D)
  float* ps = vs + kBlockK * kLd<D>;   // (kBlockQ, kBlockK) scores, then probabilities
  float* row_m = ps + kBlockQ * kLdS;  // (kBlockQ)
  float* row_l = row_m + kBlockQ;      // (kBlockQ)
  float* corr = row_l + kBlockQ;       // (kBlockQ)

  const int64_t bh = block / q_tiles;
  const int64_t t0 = (block % q_tiles) * kBlockQ;
  const int64_t b = bh / p.H, h = bh % p.H;
  const int nq = int(p.T - t0 < kBlockQ ? p.T - t0 : kBlockQ);
  const int lane = tid & 31, warp = tid >> 5;
  const int col = tid % D, row0 = tid / D;

  load_rows<T, D, kBlockQ>(q, b, h, t0, nq, qs, tid);
  if (tid < kBlockQ) {
    row_m[tid] = kNegInf;
    row_l[tid] = 0.0f;
  }
  float acc[kRowsPerThread];
  TS_UNROLL
  for (int r = 0; r < kRowsPerThread; ++r) acc[r] = 0.0f;

  const int64_t end = key_end(p, t0, nq);
  for (int64_t s0 = 0; s0 < end; s0 += kBlockK) {
    const int nk = int(end - s0 < kBlockK ? end - s0 : kBlockK);
    simt::sync_block();  // the previous tile's k, v and probabilities are consumed
    load_rows<T, D, kBlockK>(k, b, h, s0, nk, ks, tid);
    load_rows<T, D, kBlockK>(v, b, h, s0, nk, vs, tid);
    simt::sync_block();

    // Scores: lane = key, each warp a strided set of query rows.
    const int64_t s = s0 + lane;
    for (int i = warp; i < kBlockQ; i += kWarps) {
      float dot = 0.0f;
      TS_UNROLL8
      for (int c = 0; c < D; ++c) dot += qs[i * kLd<D> + c] * ks[lane * kLd<D> + c];
      const bool vis = i < nq && lane < nk && visible(p, b, t0 + i, s);
      ps[i * kLdS + lane] = vis ? dot * p.scale : kNegInf;
    }
    simt::sync_block();

    // Online softmax, one warp per row; masked entries are -inf and give probability 0.
    for (int i = warp; i < kBlockQ; i += kWarps) {
      const float m_old = row_m[i];
      const float sv = ps[i * kLdS + lane];
      const float m_new = fmaxf(m_old, warp_max(sv));
      // A row that has seen no visible key yet subtracts 0: exp(-inf - 0) = 0, never NaN.
      const float m_use = m_new == kNegInf ? 0.0f : m_new;
      float pv = ::expf(sv - m_use);
      const float sum = warp_sum(pv);
      if (p.dropout_p > 0.0f && pv != 0.0f) pv *= dropout_factor(p, bh, t0 + i, s);  // l keeps all
      ps[i * kLdS + lane] = pv;
      simt::sync_warp();  // every lane has read row_m[i] before lane 0 replaces it
      if (lane == 0) {
        const float c = ::expf(m_old - m_use);
        row_l[i] = row_l[i] * c + sum;
        row_m[i] = m_new;
        corr[i] = c;
      }
    }
    simt::sync_block();

    // O (kBlockQ, D) = O * corr + P V
    TS_UNROLL
    for (int r = 0; r < kRowsPerThread; ++r) {
      const int i = row0 + r * kRowGroups;
      float a = acc[r] * corr[i];
      for (int j = 0; j < nk; ++j) a += ps[i * kLdS + j] * vs[j * kLd<D> + col];
      acc[r] = a;
    }
  }
  simt::sync_block();

  // Normalise; a query with no visible key has l = 0: zeros and lse = -inf.
  T* o = static_cast<T*>(out.data) + b * out.sb + h * out.sh;
  TS_UNROLL
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
    ls[(t0 + tid) * lse.st] = l > 0.0f ? row_m[tid] + ::logf(l) : kNegInf;
  }
}

// Per-query statistics of rows [t0, t0 + n) of head bh into shared memory; rows past n get lse
// +inf (probability 0) and delta 0.
TS_SIMT void load_stats(const Problem& p, int64_t bh, int64_t t0, int n, const float* delta,
                        const float* lse_use, float* delta_s, float* lse_s, int tid) {
  for (int i = tid; i < kBlockQ; i += kThreads) {
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
TS_SIMT void dkdv_body(const Problem& p, Operand q, Operand k, Operand v, Operand grad_out,
                       const float* delta, const float* lse_use, Operand grad_k, Operand grad_v,
                       int64_t k_tiles, int64_t block, int tid, float* smem) {
  constexpr int kLdP = kBlockQ + 1;
  constexpr int kRowGroups = kThreads / D;
  constexpr int kRowsPerThread = kBlockK / kRowGroups;
  float* qs = smem;                      // (kBlockQ, D)
  float* dos = qs + kBlockQ * kLd<D>;    // (kBlockQ, D)
  float* ks = dos + kBlockQ * kLd<D>;    // (kBlockK, D)
  float* vs = ks + kBlockK * kLd<D>;     // (kBlockK, D)
  float* pd = vs + kBlockK * kLd<D>;     // (kBlockK, kBlockQ) dropped probabilities P * factor
  float* ds = pd + kBlockK * kLdP;       // (kBlockK, kBlockQ) dS = P * (dP * factor - delta)
  float* delta_s = ds + kBlockK * kLdP;  // (kBlockQ)
  float* lse_s = delta_s + kBlockQ;      // (kBlockQ)

  const int64_t bh = block / k_tiles;
  const int64_t s0 = (block % k_tiles) * kBlockK;
  const int64_t b = bh / p.H, h = bh % p.H;
  const int nk = int(p.S - s0 < kBlockK ? p.S - s0 : kBlockK);
  const int lane = tid & 31, warp = tid >> 5;
  const int col = tid % D, row0 = tid / D;

  load_rows<T, D, kBlockK>(k, b, h, s0, nk, ks, tid);
  load_rows<T, D, kBlockK>(v, b, h, s0, nk, vs, tid);
  float dk[kRowsPerThread], dv[kRowsPerThread];
  TS_UNROLL
  for (int r = 0; r < kRowsPerThread; ++r) dk[r] = dv[r] = 0.0f;

  for (int64_t t0 = query_begin(p, s0); t0 < p.T; t0 += kBlockQ) {
    const int nq = int(p.T - t0 < kBlockQ ? p.T - t0 : kBlockQ);
    simt::sync_block();  // the previous query tile is consumed
    load_rows<T, D, kBlockQ>(q, b, h, t0, nq, qs, tid);
    load_rows<T, D, kBlockQ>(grad_out, b, h, t0, nq, dos, tid);
    load_stats(p, bh, t0, nq, delta, lse_use, delta_s, lse_s, tid);
    simt::sync_block();

    const int i = lane;  // query of this lane
    const int64_t t = t0 + i;
    for (int j = warp; j < kBlockK; j += kWarps) {
      float sdot = 0.0f, pdot = 0.0f;
      TS_UNROLL8
      for (int c = 0; c < D; ++c) {
        sdot += ks[j * kLd<D> + c] * qs[i * kLd<D> + c];
        pdot += vs[j * kLd<D> + c] * dos[i * kLd<D> + c];
      }
      const bool vis = i < nq && j < nk && visible(p, b, t, s0 + j);
      const float prob = vis ? ::expf(sdot * p.scale - lse_s[i]) : 0.0f;
      const float f = (p.dropout_p > 0.0f && vis) ? dropout_factor(p, bh, t, s0 + j) : 1.0f;
      pd[j * kLdP + i] = prob * f;
      ds[j * kLdP + i] = prob * (pdot * f - delta_s[i]);
    }
    simt::sync_block();

    // dV (keys, D) += P_dropped dO;  dK (keys, D) += dS Q  (scale applied at the end)
    TS_UNROLL
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
  TS_UNROLL
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
TS_SIMT void dq_body(const Problem& p, Operand q, Operand k, Operand v, Operand grad_out,
                     const float* delta, const float* lse_use, Operand grad_q, int64_t q_tiles,
                     int64_t block, int tid, float* smem) {
  constexpr int kLdS = kBlockK + 1;
  constexpr int kRowGroups = kThreads / D;
  constexpr int kRowsPerThread = kBlockQ / kRowGroups;
  float* qs = smem;                          // (kBlockQ, D)
  float* dos = qs + kBlockQ * kLd<D>;        // (kBlockQ, D)
  float* ks = dos + kBlockQ * kLd<D>;        // (kBlockK, D)
  float* vs = ks + kBlockK * kLd<D>;         // (kBlockK, D)
  float* ds = vs + kBlockK * kLd<D>;         // (kBlockQ, kBlockK) dS
  float* delta_s = ds + 2 * kBlockQ * kLdS;  // (kBlockQ); layout matches backward_shared_floats
  float* lse_s = delta_s + kBlockQ;          // (kBlockQ)

  const int64_t bh = block / q_tiles;
  const int64_t t0 = (block % q_tiles) * kBlockQ;
  const int64_t b = bh / p.H, h = bh % p.H;
  const int nq = int(p.T - t0 < kBlockQ ? p.T - t0 : kBlockQ);
  const int lane = tid & 31, warp = tid >> 5;
  const int col = tid % D, row0 = tid / D;

  load_rows<T, D, kBlockQ>(q, b, h, t0, nq, qs, tid);
  load_rows<T, D, kBlockQ>(grad_out, b, h, t0, nq, dos, tid);
  load_stats(p, bh, t0, nq, delta, lse_use, delta_s, lse_s, tid);
  float dq[kRowsPerThread];
  TS_UNROLL
  for (int r = 0; r < kRowsPerThread; ++r) dq[r] = 0.0f;

  const int64_t end = key_end(p, t0, nq);
  for (int64_t s0 = 0; s0 < end; s0 += kBlockK) {
    const int nk = int(end - s0 < kBlockK ? end - s0 : kBlockK);
    simt::sync_block();  // the previous key tile is consumed
    load_rows<T, D, kBlockK>(k, b, h, s0, nk, ks, tid);
    load_rows<T, D, kBlockK>(v, b, h, s0, nk, vs, tid);
    simt::sync_block();

    const int j = lane;  // key of this lane
    const int64_t s = s0 + j;
    for (int i = warp; i < kBlockQ; i += kWarps) {
      float sdot = 0.0f, pdot = 0.0f;
      TS_UNROLL8
      for (int c = 0; c < D; ++c) {
        sdot += qs[i * kLd<D> + c] * ks[j * kLd<D> + c];
        pdot += dos[i * kLd<D> + c] * vs[j * kLd<D> + c];
      }
      const bool vis = i < nq && j < nk && visible(p, b, t0 + i, s);
      const float prob = vis ? ::expf(sdot * p.scale - lse_s[i]) : 0.0f;
      const float f = (p.dropout_p > 0.0f && vis) ? dropout_factor(p, bh, t0 + i, s) : 1.0f;
      ds[i * kLdS + j] = prob * (pdot * f - delta_s[i]);
    }
    simt::sync_block();

    // dQ (queries, D) += dS K  (scale applied at the end)
    TS_UNROLL
    for (int r = 0; r < kRowsPerThread; ++r) {
      const int i = row0 + r * kRowGroups;
      float a = dq[r];
      for (int jj = 0; jj < nk; ++jj) a += ds[i * kLdS + jj] * ks[jj * kLd<D> + col];
      dq[r] = a;
    }
  }

  T* gq = static_cast<T*>(grad_q.data) + b * grad_q.sb + h * grad_q.sh;
  TS_UNROLL
  for (int r = 0; r < kRowsPerThread; ++r) {
    const int i = row0 + r * kRowGroups;
    if (i < nq) gq[(t0 + i) * grad_q.sl + int64_t(col) * grad_q.sd] = T(dq[r] * p.scale);
  }
}

}  // namespace tessera::kernels::cuda::attention_detail

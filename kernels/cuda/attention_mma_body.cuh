// Tensor-core attention for f16 and bf16 (flash-attention-2 layout on mma.sync m16n8k16): a block
// of 4 warps owns 64 rows of its tile, 16 per warp, and every product (Q K^T, P V, and in backward
// K Q^T, V dO^T, P^T dO, dS^T Q, dS K) runs on the tensor cores with f32 accumulation. Score and
// probability tiles never leave registers: the accumulator fragment of a score tile is, element for
// element, the A fragment of the next product once rounded to 16 bits. Row statistics (max, sum)
// are reduced over the 4 lanes that share a row.
//
// The bodies are plain functions of (block, thread, shared memory) over kernels/cuda/simt.cuh, so
// the same code runs as CUDA kernels (attention_mma.cu) and under the SIMT emulator in tests.
// Numerics match the f32 kernels (attention_forward.cu, attention_backward.cu): same masking,
// dropout counters, lse and delta; the 16-bit rounding of P and dS before their products is the
// only extra error, as in flash attention.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/half.h"
#include "kernels/cuda/attention_common.h"
#include "kernels/cuda/attention_mask.h"
#include "kernels/cuda/simt.cuh"

namespace tessera::kernels::cuda::attention_mma {

using attention_detail::Operand;
using attention_detail::Problem;
using attention_detail::RowOperand;

inline constexpr int kThreads = 128;
inline constexpr int kTile = 64;  // rows of a query or key tile: 16 per warp
// Shared tiles hold 16-bit values; rows are padded by 16 bytes so the 8 rows x 4 words a warp reads
// for one fragment fall in 32 different banks.
template <int D>
inline constexpr int kLdRow = D + 8;      // (kTile, D) tiles
inline constexpr int kLdCol = kTile + 8;  // (D, kTile) transposed tiles

template <int D>
inline constexpr size_t kRowTileBytes = sizeof(uint16_t) * size_t(kTile) * kLdRow<D>;
template <int D>
inline constexpr size_t kColTileBytes = sizeof(uint16_t) * size_t(D) * kLdCol;

// Rows [l0, l0 + n) of head (b, h) of x into a shared tile, row-major (kTile, D) or transposed
// (D, kTile); rows n..kTile are zero, so products over them add nothing.
template <typename T, int D, bool kTransposed>
TS_SIMT void load_tile(const Operand& x, int64_t b, int64_t h, int64_t l0, int n, uint16_t* tile,
                       int tid) {
  constexpr int kVecs = D / 8;  // 16-byte pieces of a row
  const T* base = static_cast<const T*>(x.data) + b * x.sb + h * x.sh;
  for (int idx = tid; idx < kTile * kVecs; idx += kThreads) {
    const int r = idx / kVecs, c = (idx % kVecs) * 8;
    simt::Pack16 v{};
    if (r < n) {
      const T* src = base + (l0 + r) * x.sl;
      if (x.rows16) {
        v = simt::load16(src + c);
      } else {
        TS_UNROLL
        for (int e = 0; e < 8; e += 2) {
          v.w[e / 2] = uint32_t(src[int64_t(c + e) * x.sd].bits) |
                       (uint32_t(src[int64_t(c + e + 1) * x.sd].bits) << 16);
        }
      }
    }
    if constexpr (!kTransposed) {
      simt::store16(tile + r * kLdRow<D> + c, v);
    } else {
      TS_UNROLL
      for (int e = 0; e < 8; ++e)
        tile[(c + e) * kLdCol + r] = uint16_t(v.w[e / 2] >> (16 * (e % 2)));
    }
  }
}

// The A fragment (16 x 16, rows r0 = 16 * warp + g and r0 + 8, columns k0..k0 + 15) of a row tile.
template <int kLd>
TS_SIMT void load_a(const uint16_t* tile, int r0, int k0, int tig, uint32_t (&a)[4]) {
  const uint16_t* p = tile + r0 * kLd + k0 + 2 * tig;
  a[0] = simt::load_u32(p);
  a[1] = simt::load_u32(p + 8 * kLd);
  a[2] = simt::load_u32(p + 8);
  a[3] = simt::load_u32(p + 8 * kLd + 8);
}

// The B fragment (16 x 8: k = columns k0..k0 + 15, n = row n0 + g) of a tile whose rows are B's
// columns: a row tile gives B = tile^T, a transposed tile gives B = the original rows.
template <int kLd>
TS_SIMT void load_b(const uint16_t* tile, int n0, int k0, int g, int tig, uint32_t (&b)[2]) {
  const uint16_t* p = tile + (n0 + g) * kLd + k0 + 2 * tig;
  b[0] = simt::load_u32(p);
  b[1] = simt::load_u32(p + 8);
}

// The accumulator fragments c[2j], c[2j + 1] (16 rows x 16 columns 16j..16j + 15) rounded to the A
// fragment of the next product.
template <typename T>
TS_SIMT void to_a(const float (*c)[4], int j, uint32_t (&a)[4]) {
  a[0] = simt::pack2<T>(c[2 * j][0], c[2 * j][1]);
  a[1] = simt::pack2<T>(c[2 * j][2], c[2 * j][3]);
  a[2] = simt::pack2<T>(c[2 * j + 1][0], c[2 * j + 1][1]);
  a[3] = simt::pack2<T>(c[2 * j + 1][2], c[2 * j + 1][3]);
}

// Max and sum over the 4 lanes holding one row of an accumulator tile.
TS_SIMT float quad_max(float v) {
  v = fmaxf(v, simt::shfl_xor(v, 1));
  return fmaxf(v, simt::shfl_xor(v, 2));
}

TS_SIMT float quad_sum(float v) {
  v += simt::shfl_xor(v, 1);
  return v + simt::shfl_xor(v, 2);
}

// Two products side by side over the head dim, 16 rows (r0, r0 + 8 apart) by 64 columns per warp:
// acc1 = x1[rows] y1^T and acc2 = x2[rows] y2^T for (kTile, D) row tiles (S = Q K^T with
// dP = dO V^T, or their transposes in the key-major pass).
template <typename T, int D>
TS_SIMT void paired_products(const uint16_t* x1, const uint16_t* y1, const uint16_t* x2,
                             const uint16_t* y2, int r0, int g, int tig, float (&acc1)[8][4],
                             float (&acc2)[8][4]) {
  TS_UNROLL
  for (int nc = 0; nc < 8; ++nc) {
    TS_UNROLL
    for (int e = 0; e < 4; ++e) acc1[nc][e] = acc2[nc][e] = 0.0f;
  }
  TS_UNROLL
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t a1[4], a2[4];
    load_a<kLdRow<D>>(x1, r0, kk * 16, tig, a1);
    load_a<kLdRow<D>>(x2, r0, kk * 16, tig, a2);
    TS_UNROLL
    for (int nc = 0; nc < 8; ++nc) {
      uint32_t b1[2], b2[2];
      load_b<kLdRow<D>>(y1, nc * 8, kk * 16, g, tig, b1);
      load_b<kLdRow<D>>(y2, nc * 8, kk * 16, g, tig, b2);
      simt::mma_16816<T>(acc1[nc], a1, b1);
      simt::mma_16816<T>(acc2[nc], a2, b2);
    }
  }
}

// acc (16 x D per warp) += src (16 x 64, an accumulator tile rounded to 16 bits) times the 64 rows
// whose transpose is the (D, kTile) tile `cols`: O += P V, dV += P^T dO, dK += dS^T Q, dQ += dS K.
template <typename T, int D>
TS_SIMT void accumulate_product(const float (*src)[4], const uint16_t* cols, int g, int tig,
                                float (*acc)[4]) {
  TS_UNROLL
  for (int j = 0; j < kTile / 16; ++j) {
    uint32_t a[4];
    to_a<T>(src, j, a);
    TS_UNROLL
    for (int dc = 0; dc < D / 8; ++dc) {
      uint32_t b[2];
      load_b<kLdCol>(cols, dc * 8, j * 16, g, tig, b);
      simt::mma_16816<T>(acc[dc], a, b);
    }
  }
}

// Whether every (row, key) pair of a full tile is visible, so the per-element tests can be skipped.
TS_SIMT bool tile_all_visible(const Problem& p, int64_t t0, int nq, int64_t s0, int nk) {
  return nq == kTile && nk == kTile && p.mask == nullptr &&
         (!p.causal || s0 + kTile - 1 <= t0 + p.shift);
}

// Row i of a tile element (fragment n-chunk nc, register e) and its column.
TS_SIMT int frag_row(int r0, int e) { return r0 + (e >= 2 ? 8 : 0); }
TS_SIMT int frag_col(int nc, int tig, int e) { return nc * 8 + 2 * tig + (e & 1); }

// Output rows [r0, r0 + 8 apart) of an accumulator tile (16 x D) into rows l0 + row of head (b, h)
// of y, times `scale`; rows at or past n are not written.
template <typename T, int D>
TS_SIMT void store_rows(const Operand& y, int64_t b, int64_t h, int64_t l0, int n, int r0, int tig,
                        const float (*acc)[4], const float (&scale)[2]) {
  T* base = static_cast<T*>(y.data) + b * y.sb + h * y.sh;
  TS_UNROLL
  for (int half = 0; half < 2; ++half) {
    const int row = r0 + 8 * half;
    if (row >= n) continue;
    T* dst = base + (l0 + row) * y.sl;
    TS_UNROLL
    for (int dc = 0; dc < D / 8; ++dc) {
      TS_UNROLL
      for (int e = 0; e < 2; ++e)
        dst[int64_t(dc * 8 + 2 * tig + e) * y.sd] = T(acc[dc][2 * half + e] * scale[half]);
    }
  }
}

// ------------------------------------------------------------------------------------------------
// forward

// One block per (batch, head, 64-query tile): Q fragments stay in registers, K and V^T tiles pass
// through shared memory, and the online softmax keeps (max, sum) per row.
template <typename T, int D>
struct Forward {
  static constexpr size_t kSharedBytes = 2 * kRowTileBytes<D> + kColTileBytes<D>;

  static TS_SIMT void run(const Problem& p, const Operand& q, const Operand& k, const Operand& v,
                          const Operand& out, const RowOperand& lse, int64_t q_tiles, int64_t block,
                          int tid, unsigned char* shared) {
    constexpr float kNegInf = -INFINITY;
    uint16_t* qs = reinterpret_cast<uint16_t*>(shared);
    uint16_t* ks = qs + kTile * kLdRow<D>;
    uint16_t* vt = ks + kTile * kLdRow<D>;  // V transposed: (D, keys)

    const int64_t heads = p.B * p.H, bh = block % heads;
    const int64_t t0 = (q_tiles - 1 - block / heads) * kTile;  // the longest (causal) tiles first
    const int64_t b = bh / p.H, h = bh % p.H;
    const int nq = int(p.T - t0 < kTile ? p.T - t0 : kTile);
    const int lane = tid & 31, g = lane >> 2, tig = lane & 3, r0 = (tid >> 5) * 16 + g;

    load_tile<T, D, false>(q, b, h, t0, nq, qs, tid);
    simt::sync_block();
    uint32_t qa[D / 16][4];
    TS_UNROLL
    for (int kk = 0; kk < D / 16; ++kk) load_a<kLdRow<D>>(qs, r0, kk * 16, tig, qa[kk]);

    float o[D / 8][4];
    TS_UNROLL
    for (int dc = 0; dc < D / 8; ++dc) o[dc][0] = o[dc][1] = o[dc][2] = o[dc][3] = 0.0f;
    float m[2] = {kNegInf, kNegInf}, l[2] = {0.0f, 0.0f};

    const int64_t end = attention_detail::key_end(p, t0, nq);
    for (int64_t s0 = 0; s0 < end; s0 += kTile) {
      const int nk = int(end - s0 < kTile ? end - s0 : kTile);
      simt::sync_block();  // every warp is done with the previous K and V tiles
      load_tile<T, D, false>(k, b, h, s0, nk, ks, tid);
      load_tile<T, D, true>(v, b, h, s0, nk, vt, tid);
      simt::sync_block();

      // S = Q K^T (16 x 64 per warp)
      float s[8][4];
      TS_UNROLL
      for (int nc = 0; nc < 8; ++nc) s[nc][0] = s[nc][1] = s[nc][2] = s[nc][3] = 0.0f;
      TS_UNROLL
      for (int kk = 0; kk < D / 16; ++kk) {
        TS_UNROLL
        for (int nc = 0; nc < 8; ++nc) {
          uint32_t kb[2];
          load_b<kLdRow<D>>(ks, nc * 8, kk * 16, g, tig, kb);
          simt::mma_16816<T>(s[nc], qa[kk], kb);
        }
      }

      // Scale and mask; masked entries are -inf and give probability 0.
      const bool all_visible = tile_all_visible(p, t0, nq, s0, nk);
      float tile_max[2] = {kNegInf, kNegInf};
      TS_UNROLL
      for (int nc = 0; nc < 8; ++nc) {
        TS_UNROLL
        for (int e = 0; e < 4; ++e) {
          const int row = frag_row(r0, e), key = frag_col(nc, tig, e);
          const bool vis = all_visible || (row < nq && key < nk &&
                                           attention_detail::visible(p, b, t0 + row, s0 + key));
          s[nc][e] = vis ? s[nc][e] * p.scale : kNegInf;
          tile_max[e >> 1] = fmaxf(tile_max[e >> 1], s[nc][e]);
        }
      }

      // Online softmax: a row that has seen no visible key yet subtracts 0, so exp(-inf - 0) = 0.
      float m_use[2], corr[2];
      TS_UNROLL
      for (int r = 0; r < 2; ++r) {
        const float m_new = fmaxf(m[r], quad_max(tile_max[r]));
        m_use[r] = m_new == kNegInf ? 0.0f : m_new;
        corr[r] = simt::fast_exp(m[r] - m_use[r]);
        m[r] = m_new;
      }
      float sum[2] = {0.0f, 0.0f};
      TS_UNROLL
      for (int nc = 0; nc < 8; ++nc) {
        TS_UNROLL
        for (int e = 0; e < 4; ++e) {
          float pv = simt::fast_exp(s[nc][e] - m_use[e >> 1]);
          sum[e >> 1] += pv;  // l counts every probability; dropout only thins what reaches O
          if (p.dropout_p > 0.0f && pv != 0.0f) {
            pv *= attention_detail::dropout_factor(p, bh, t0 + frag_row(r0, e),
                                                   s0 + frag_col(nc, tig, e));
          }
          s[nc][e] = pv;
        }
      }
      TS_UNROLL
      for (int r = 0; r < 2; ++r) l[r] = l[r] * corr[r] + quad_sum(sum[r]);
      TS_UNROLL
      for (int dc = 0; dc < D / 8; ++dc) {
        TS_UNROLL
        for (int e = 0; e < 4; ++e) o[dc][e] *= corr[e >> 1];
      }

      accumulate_product<T, D>(s, vt, g, tig, o);  // O += P V
    }

    // Normalise; a query with no visible key has l = 0: zeros and lse = -inf.
    const float inv[2] = {l[0] > 0.0f ? 1.0f / l[0] : 0.0f, l[1] > 0.0f ? 1.0f / l[1] : 0.0f};
    store_rows<T, D>(out, b, h, t0, nq, r0, tig, o, inv);
    if (tig == 0) {
      float* ls = static_cast<float*>(lse.data) + b * lse.sb + h * lse.sh;
      TS_UNROLL
      for (int r = 0; r < 2; ++r) {
        const int row = r0 + 8 * r;
        if (row < nq) ls[(t0 + row) * lse.st] = l[r] > 0.0f ? m[r] + logf(l[r]) : kNegInf;
      }
    }
  }
};

// ------------------------------------------------------------------------------------------------
// backward

// Per-query statistics of rows [t0, t0 + n) of head bh into shared memory (see
// attention_backward.cu: delta = rowsum(dO * O), lse_use = lse or +inf); rows past n get lse +inf
// (probability 0), delta 0.
TS_SIMT void load_row_stats(const Problem& p, int64_t bh, int64_t t0, int n, const float* delta,
                            const float* lse_use, float* delta_s, float* lse_s, int tid) {
  for (int i = tid; i < kTile; i += kThreads) {
    delta_s[i] = i < n ? delta[bh * p.T + t0 + i] : 0.0f;
    lse_s[i] = i < n ? lse_use[bh * p.T + t0 + i] : INFINITY;
  }
}

// dK and dV of 64 keys of one head (a block per (batch, head, key tile)), over every query tile
// that may see them. Each warp owns 16 keys and computes S^T = K Q^T and dP^T = V dO^T, then dV +=
// (P ∘ dropout)^T dO and dK += dS^T Q with dS = P ∘ (dP ∘ dropout - delta).
template <typename T, int D>
struct BackwardKV {
  static constexpr size_t kSharedBytes =
      4 * kRowTileBytes<D> + 2 * kColTileBytes<D> + 2 * kTile * sizeof(float);

  static TS_SIMT void run(const Problem& p, const Operand& q, const Operand& k, const Operand& v,
                          const Operand& grad_out, const float* delta, const float* lse_use,
                          const Operand& grad_k, const Operand& grad_v, int64_t k_tiles,
                          int64_t block, int tid, unsigned char* shared) {
    uint16_t* ks = reinterpret_cast<uint16_t*>(shared);
    uint16_t* vs = ks + kTile * kLdRow<D>;
    uint16_t* qs = vs + kTile * kLdRow<D>;
    uint16_t* dos = qs + kTile * kLdRow<D>;
    uint16_t* qt = dos + kTile * kLdRow<D>;  // Q transposed: (D, queries)
    uint16_t* dot = qt + D * kLdCol;         // dO transposed
    float* delta_s = reinterpret_cast<float*>(dot + D * kLdCol);
    float* lse_s = delta_s + kTile;

    const int64_t bh = block / k_tiles, s0 = (block % k_tiles) * kTile;
    const int64_t b = bh / p.H, h = bh % p.H;
    const int nk = int(p.S - s0 < kTile ? p.S - s0 : kTile);
    const int lane = tid & 31, g = lane >> 2, tig = lane & 3, r0 = (tid >> 5) * 16 + g;

    load_tile<T, D, false>(k, b, h, s0, nk, ks, tid);
    load_tile<T, D, false>(v, b, h, s0, nk, vs, tid);
    float dk[D / 8][4], dv[D / 8][4];
    TS_UNROLL
    for (int dc = 0; dc < D / 8; ++dc) {
      TS_UNROLL
      for (int e = 0; e < 4; ++e) dk[dc][e] = dv[dc][e] = 0.0f;
    }

    for (int64_t t0 = attention_detail::query_begin(p, s0); t0 < p.T; t0 += kTile) {
      const int nq = int(p.T - t0 < kTile ? p.T - t0 : kTile);
      simt::sync_block();  // the previous query tile is consumed
      load_tile<T, D, false>(q, b, h, t0, nq, qs, tid);
      load_tile<T, D, true>(q, b, h, t0, nq, qt, tid);
      load_tile<T, D, false>(grad_out, b, h, t0, nq, dos, tid);
      load_tile<T, D, true>(grad_out, b, h, t0, nq, dot, tid);
      load_row_stats(p, bh, t0, nq, delta, lse_use, delta_s, lse_s, tid);
      simt::sync_block();

      // S^T = K Q^T and dP^T = V dO^T (16 keys x 64 queries per warp)
      float st[8][4], dpt[8][4];
      paired_products<T, D>(ks, qs, vs, dos, r0, g, tig, st, dpt);

      // P^T (dropped) into st, dS^T into dpt.
      const bool all_visible = tile_all_visible(p, t0, nq, s0, nk);
      TS_UNROLL
      for (int nc = 0; nc < 8; ++nc) {
        TS_UNROLL
        for (int e = 0; e < 4; ++e) {
          const int key = frag_row(r0, e), qi = frag_col(nc, tig, e);
          const int64_t t = t0 + qi, s = s0 + key;
          const bool vis =
              all_visible || (key < nk && qi < nq && attention_detail::visible(p, b, t, s));
          const float prob = vis ? simt::fast_exp(st[nc][e] * p.scale - lse_s[qi]) : 0.0f;
          const float f =
              (p.dropout_p > 0.0f && vis) ? attention_detail::dropout_factor(p, bh, t, s) : 1.0f;
          st[nc][e] = prob * f;
          dpt[nc][e] = prob * (dpt[nc][e] * f - delta_s[qi]);
        }
      }

      // dV += P^T dO, dK += dS^T Q (scale applied at the end)
      accumulate_product<T, D>(st, dot, g, tig, dv);
      accumulate_product<T, D>(dpt, qt, g, tig, dk);
    }

    const float k_scale[2] = {p.scale, p.scale}, one[2] = {1.0f, 1.0f};
    store_rows<T, D>(grad_k, b, h, s0, nk, r0, tig, dk, k_scale);
    store_rows<T, D>(grad_v, b, h, s0, nk, r0, tig, dv, one);
  }
};

// dQ of 64 queries of one head (a block per (batch, head, query tile)), over every key tile they
// may see: S = Q K^T and dP = dO V^T, then dQ += dS K.
template <typename T, int D>
struct BackwardQ {
  static constexpr size_t kSharedBytes =
      4 * kRowTileBytes<D> + kColTileBytes<D> + 2 * kTile * sizeof(float);

  static TS_SIMT void run(const Problem& p, const Operand& q, const Operand& k, const Operand& v,
                          const Operand& grad_out, const float* delta, const float* lse_use,
                          const Operand& grad_q, int64_t q_tiles, int64_t block, int tid,
                          unsigned char* shared) {
    uint16_t* qs = reinterpret_cast<uint16_t*>(shared);
    uint16_t* dos = qs + kTile * kLdRow<D>;
    uint16_t* ks = dos + kTile * kLdRow<D>;
    uint16_t* vs = ks + kTile * kLdRow<D>;
    uint16_t* kt = vs + kTile * kLdRow<D>;  // K transposed: (D, keys)
    float* delta_s = reinterpret_cast<float*>(kt + D * kLdCol);
    float* lse_s = delta_s + kTile;

    const int64_t heads = p.B * p.H, bh = block % heads;
    const int64_t t0 = (q_tiles - 1 - block / heads) * kTile;  // the longest (causal) tiles first
    const int64_t b = bh / p.H, h = bh % p.H;
    const int nq = int(p.T - t0 < kTile ? p.T - t0 : kTile);
    const int lane = tid & 31, g = lane >> 2, tig = lane & 3, r0 = (tid >> 5) * 16 + g;

    load_tile<T, D, false>(q, b, h, t0, nq, qs, tid);
    load_tile<T, D, false>(grad_out, b, h, t0, nq, dos, tid);
    load_row_stats(p, bh, t0, nq, delta, lse_use, delta_s, lse_s, tid);
    float dq[D / 8][4];
    TS_UNROLL
    for (int dc = 0; dc < D / 8; ++dc) dq[dc][0] = dq[dc][1] = dq[dc][2] = dq[dc][3] = 0.0f;

    const int64_t end = attention_detail::key_end(p, t0, nq);
    for (int64_t s0 = 0; s0 < end; s0 += kTile) {
      const int nk = int(end - s0 < kTile ? end - s0 : kTile);
      simt::sync_block();  // the previous key tile is consumed
      load_tile<T, D, false>(k, b, h, s0, nk, ks, tid);
      load_tile<T, D, true>(k, b, h, s0, nk, kt, tid);
      load_tile<T, D, false>(v, b, h, s0, nk, vs, tid);
      simt::sync_block();

      // S = Q K^T and dP = dO V^T (16 queries x 64 keys per warp)
      float s[8][4], dp[8][4];
      paired_products<T, D>(qs, ks, dos, vs, r0, g, tig, s, dp);

      // dS into s.
      const bool all_visible = tile_all_visible(p, t0, nq, s0, nk);
      TS_UNROLL
      for (int nc = 0; nc < 8; ++nc) {
        TS_UNROLL
        for (int e = 0; e < 4; ++e) {
          const int row = frag_row(r0, e), key = frag_col(nc, tig, e);
          const int64_t t = t0 + row, sk = s0 + key;
          const bool vis =
              all_visible || (row < nq && key < nk && attention_detail::visible(p, b, t, sk));
          const float prob = vis ? simt::fast_exp(s[nc][e] * p.scale - lse_s[row]) : 0.0f;
          const float f =
              (p.dropout_p > 0.0f && vis) ? attention_detail::dropout_factor(p, bh, t, sk) : 1.0f;
          s[nc][e] = prob * (dp[nc][e] * f - delta_s[row]);
        }
      }

      accumulate_product<T, D>(s, kt, g, tig, dq);  // dQ += dS K (scale applied at the end)
    }

    const float q_scale[2] = {p.scale, p.scale};
    store_rows<T, D>(grad_q, b, h, t0, nq, r0, tig, dq, q_scale);
  }
};

}  // namespace tessera::kernels::cuda::attention_mma

// CPU attention forward, flash style: each (batch, head, query block) runs an online softmax over
// key tiles; scores and P V go through sgemm, and the (T, S) probabilities are never stored.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_common.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/row_math.h"

namespace tessera::kernels::cpu {
namespace {

using namespace attention_detail;

// One thread's tile buffers, reused across its work items.
struct ForwardScratch {
  std::vector<float> st, factor, o, m, l;
  explicit ForwardScratch(const Problem& p)
      : st(kBlockQ * kBlockK),
        factor(p.dropout_p > 0.0f ? kBlockQ * kBlockK : 0),
        o(kBlockQ * p.D),
        m(kBlockQ), l(kBlockQ) {}
};

// Output rows [t0, t0 + nq) of head (b, h): an online softmax over key tiles, each query row
// keeping its running max m and sum l, the accumulator O rescaled when m grows.
void forward_block(const Problem& p, const HeadRows& qr, const HeadRows& kr, const HeadRows& vr,
                   int64_t b, int64_t h, int64_t t0, ForwardScratch& w, const Tensor& out,
                   const Tensor& lse) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const int64_t nq = std::min(kBlockQ, p.T - t0), d = p.D;
  const float* q = qr.head(b, h) + t0 * qr.ld;
  const float* k = kr.head(b, h);
  const float* v = vr.head(b, h);
  float *st = w.st.data(), *o = w.o.data(), *m = w.m.data(), *l = w.l.data();
  std::fill(o, o + nq * d, 0.0f);
  std::fill(m, m + nq, kNegInf);
  std::fill(l, l + nq, 0.0f);

  const int64_t key_end = p.key_end(t0, nq);
  for (int64_t s0 = 0; s0 < key_end; s0 += kBlockK) {
    const int64_t nk = std::min(kBlockK, key_end - s0);
    // S (nq, nk) = scale * Q_blk K_blk^T
    sgemm(false, true, nq, nk, d, p.scale, q, qr.ld, k + s0 * kr.ld, kr.ld, 0.0f, st, nk);
    const Tile tile{st, t0, nq, s0, nk, nk, 1};
    if (tile_needs_mask(p, tile)) mask_tile(p, b, tile);
    if (p.dropout_p > 0.0f) dropout_factors(p, b * p.H + h, {w.factor.data(), t0, nq, s0, nk, nk, 1});
    // One ISA dispatch per tile: the rows are short (kBlockK keys), so a dispatch per row helper
    // cost a sizeable part of their work.
    with_isa([&](auto isa) {
      for (int64_t j = 0; j < nq; ++j) {
        float* row = st + j * nk;
        const float m_new = std::max(m[j], cpu::detail::row_max(isa, row, nk));
        // A query that has seen no visible key yet subtracts 0: exp(-inf - 0) = 0, never NaN.
        const float m_use = m_new == kNegInf ? 0.0f : m_new;
        const float corr = cpu::detail::exp_approx(m[j] - m_use);
        l[j] = l[j] * corr + cpu::detail::row_exp_store(isa, row, m_use, row, nk);
        m[j] = m_new;
        if (p.dropout_p > 0.0f) {  // l keeps every probability; P V sees the kept ones
          const float* f = w.factor.data() + j * nk;
          for (int64_t i = 0; i < nk; ++i) row[i] *= f[i];
        }
        if (corr != 1.0f) {
          float* orow = o + j * d;
          for (int64_t c = 0; c < d; ++c) orow[c] *= corr;
        }
      }
    });
    // O (nq, D) += P V_blk
    sgemm(false, false, nq, d, nk, 1.0f, st, nk, v + s0 * vr.ld, vr.ld, 1.0f, o, d);
  }

  // Normalise; a query with no visible key has l = 0: zeros and lse = -inf.
  for (int64_t j = 0; j < nq; ++j) {
    const float inv = l[j] > 0.0f ? 1.0f / l[j] : 0.0f;
    float* orow = o + j * d;
    for (int64_t c = 0; c < d; ++c) orow[c] *= inv;
    m[j] = l[j] > 0.0f ? m[j] + std::log(l[j]) : kNegInf;
  }
  store_block(o, d, 1, nq, d, out, b * out.stride(0) + h * out.stride(1) + t0 * out.stride(2),
              out.stride(2), out.stride(3));
  store_block(m, 1, 0, nq, 1, lse, b * lse.stride(0) + h * lse.stride(1) + t0 * lse.stride(2),
              lse.stride(2), 0);
}

}  // namespace

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_padding_mask,
                       const AttentionOptions& opts, const Tensor& out, const Tensor& lse) {
  constexpr const char* kOp = "attention_forward";
  const Problem p = make_problem(kOp, q, k, v, key_padding_mask, opts);
  check_tensor(kOp, "out", out, q.shape(), q.dtype(), false);
  check_tensor(kOp, "lse", lse, {p.B, p.H, p.T}, DType::f32, false);
  if (p.B * p.H * p.T == 0) return;
  const HeadRows qr = head_rows(q), kr = head_rows(k), vr = head_rows(v);
  const int64_t q_blocks = (p.T + kBlockQ - 1) / kBlockQ;
  // Work items (batch, head, query block) write disjoint output rows.
  parallel_for(p.B * p.H * q_blocks, 1, [&](int64_t begin, int64_t end) {
    ForwardScratch scratch(p);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t bh = item / q_blocks, qb = item % q_blocks;
      forward_block(p, qr, kr, vr, bh / p.H, bh % p.H, qb * kBlockQ, scratch, out, lse);
    }
  });
}

}  // namespace tessera::kernels::cpu

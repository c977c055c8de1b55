// CPU attention backward, flash style: each work item owns key blocks of one head, recomputes the
// probabilities tile by tile from q, k and lse, and accumulates dK, dV in small private buffers
// while dQ accumulates per (head, split); splits only exist when there are fewer heads than threads.
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

struct Operands {
  HeadRows q, k, v, out, grad_out;
};

// One thread's buffers, reused across its work items.
struct BackwardScratch {
  std::vector<float> st, dpt, factor, dk, dv, lse_use, dvec;
  explicit BackwardScratch(const Problem& p)
      : st(kBlockK * kBlockQ),
        dpt(kBlockK * kBlockQ),
        factor(p.dropout_p > 0.0f ? kBlockK * kBlockQ : 0),
        dk(kBlockK * p.D),
        dv(kBlockK * p.D),
        lse_use(p.T),
        dvec(p.T) {}
};

// Per-query values of head (b, h): lse (+inf for a query with no visible key, so its recomputed
// probabilities exp(s - lse) are 0, not NaN) and D = rowsum(dO * O).
void head_stats(const Problem& p, const Operands& x, const Tensor& lse, int64_t b, int64_t h,
                BackwardScratch& w) {
  const float* l = static_cast<const float*>(lse.data_ptr()) + b * lse.stride(0) + h * lse.stride(1);
  const float* o = x.out.head(b, h);
  const float* go = x.grad_out.head(b, h);
  for (int64_t t = 0; t < p.T; ++t) {
    const float v = l[t * lse.stride(2)];
    w.lse_use[t] = v == -std::numeric_limits<float>::infinity() ? std::numeric_limits<float>::infinity() : v;
    const float* orow = o + t * x.out.ld;
    const float* grow = go + t * x.grad_out.ld;
    float acc = 0.0f;
    for (int64_t c = 0; c < p.D; ++c) acc += orow[c] * grow[c];
    w.dvec[t] = acc;
  }
}

// Key rows [s0, s0 + nk) of head (b, h) against every query that can see them. Tiles are
// (keys, queries): st holds P^T, dpt holds dP^T and then dS^T; dQ's product reads dS as dpt
// transposed, which sgemm packs by plain copies.
void backward_key_block(const Problem& p, const Operands& x, int64_t b, int64_t h, int64_t s0,
                        BackwardScratch& w, float* dq, const Tensor& grad_k, const Tensor& grad_v) {
  const int64_t nk = std::min(kBlockK, p.S - s0), d = p.D;
  const float* k = x.k.head(b, h) + s0 * x.k.ld;
  const float* v = x.v.head(b, h) + s0 * x.v.ld;
  float *st = w.st.data(), *dpt = w.dpt.data(), *factor = w.factor.data();
  float *dk = w.dk.data(), *dv = w.dv.data();
  std::fill(dk, dk + nk * d, 0.0f);
  std::fill(dv, dv + nk * d, 0.0f);

  for (int64_t t0 = p.query_begin(s0); t0 < p.T; t0 += kBlockQ) {
    const int64_t nq = std::min(kBlockQ, p.T - t0);
    const float* q = x.q.head(b, h) + t0 * x.q.ld;
    const float* go = x.grad_out.head(b, h) + t0 * x.grad_out.ld;
    // P^T (nk, nq) = exp(scale * K Q^T - lse), masked entries 0.
    sgemm(false, true, nk, nq, d, p.scale, k, x.k.ld, q, x.q.ld, 0.0f, st, nq);
    const Tile tile{st, t0, nq, s0, nk, 1, nq};
    if (tile_needs_mask(p, tile)) mask_tile(p, b, tile);
    with_isa([&](auto isa) {
      for (int64_t i = 0; i < nk; ++i) {
        cpu::detail::row_exp_sub(isa, st + i * nq, w.lse_use.data() + t0, nq);
      }
    });
    // dP^T (nk, nq) = V dO^T, through the same dropout mask as the forward.
    sgemm(false, true, nk, nq, d, 1.0f, v, x.v.ld, go, x.grad_out.ld, 0.0f, dpt, nq);
    const float* pd = st;
    if (p.dropout_p > 0.0f) {
      dropout_factors(p, b * p.H + h, {factor, t0, nq, s0, nk, 1, nq});
      for (int64_t i = 0; i < nk * nq; ++i) {
        dpt[i] *= factor[i];
        factor[i] *= st[i];  // the dropped probabilities, as P V saw them
      }
      pd = factor;
    }
    // dV (nk, D) += P_dropped^T dO
    sgemm(false, false, nk, d, nq, 1.0f, pd, nq, go, x.grad_out.ld, 1.0f, dv, d);
    // dS^T = P^T * (dP^T - D)
    for (int64_t i = 0; i < nk; ++i) {
      const float* prow = st + i * nq;
      float* row = dpt + i * nq;
      const float* dvec = w.dvec.data() + t0;
      for (int64_t j = 0; j < nq; ++j) row[j] = prow[j] * (row[j] - dvec[j]);
    }
    // dQ (nq, D) += scale * dS K;  dK (nk, D) += scale * dS^T Q
    sgemm(true, false, nq, d, nk, p.scale, dpt, nq, k, x.k.ld, 1.0f, dq + t0 * d, d);
    sgemm(false, false, nk, d, nq, p.scale, dpt, nq, q, x.q.ld, 1.0f, dk, d);
  }
  store_block(dk, d, 1, nk, d, grad_k, b * grad_k.stride(0) + h * grad_k.stride(1) + s0 * grad_k.stride(2),
              grad_k.stride(2), grad_k.stride(3));
  store_block(dv, d, 1, nk, d, grad_v, b * grad_v.stride(0) + h * grad_v.stride(1) + s0 * grad_v.stride(2),
              grad_v.stride(2), grad_v.stride(3));
}

}  // namespace

void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& lse, const Tensor& grad_out, const Tensor& key_padding_mask,
                        const AttentionOptions& opts, const Tensor& grad_q, const Tensor& grad_k,
                        const Tensor& grad_v) {
  constexpr const char* kOp = "attention_backward";
  const Problem p = make_problem(kOp, q, k, v, key_padding_mask, opts);
  check_tensor(kOp, "out", out, q.shape(), q.dtype(), true);
  check_tensor(kOp, "grad_out", grad_out, q.shape(), q.dtype(), true);
  check_tensor(kOp, "lse", lse, {p.B, p.H, p.T}, DType::f32, false);
  check_tensor(kOp, "grad_q", grad_q, q.shape(), q.dtype(), true);
  check_tensor(kOp, "grad_k", grad_k, k.shape(), q.dtype(), true);
  check_tensor(kOp, "grad_v", grad_v, k.shape(), q.dtype(), true);
  const int64_t heads = p.B * p.H;
  if (heads == 0) return;
  const Operands x{head_rows(q), head_rows(k), head_rows(v), head_rows(out), head_rows(grad_out)};

  // Whole heads per work item keep dK, dV and dQ private. With fewer heads than threads, a head's
  // key blocks are dealt round-robin (balancing causal work) to `splits` items, each with its own
  // dQ partial, summed afterwards.
  const int64_t k_blocks = (p.S + kBlockK - 1) / kBlockK;
  const int64_t threads = num_threads();
  const int64_t splits =
      heads >= threads ? 1 : std::clamp<int64_t>((threads + heads - 1) / heads, 1, std::max<int64_t>(k_blocks, 1));
  const int64_t head_elems = p.T * p.D;
  std::vector<float> dq_parts(size_t(heads * splits * head_elems), 0.0f);  // (heads, splits, T, D)

  parallel_for(heads * splits, 1, [&](int64_t begin, int64_t end) {
    BackwardScratch scratch(p);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t bh = item / splits, split = item % splits;
      const int64_t b = bh / p.H, h = bh % p.H;
      head_stats(p, x, lse, b, h, scratch);
      float* dq = dq_parts.data() + item * head_elems;
      for (int64_t kb = split; kb < k_blocks; kb += splits) {
        backward_key_block(p, x, b, h, kb * kBlockK, scratch, dq, grad_k, grad_v);
      }
    }
  });
  parallel_for(heads, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh) {
      float* dq = dq_parts.data() + bh * splits * head_elems;
      for (int64_t s = 1; s < splits; ++s) {
        const float* part = dq + s * head_elems;
        for (int64_t i = 0; i < head_elems; ++i) dq[i] += part[i];
      }
      const int64_t b = bh / p.H, h = bh % p.H;
      store_block(dq, p.D, 1, p.T, p.D, grad_q, b * grad_q.stride(0) + h * grad_q.stride(1),
                  grad_q.stride(2), grad_q.stride(3));
    }
  });
}

}  // namespace tessera::kernels::cpu

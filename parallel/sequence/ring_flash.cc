// Ring attention over the fused kernels (attention.h, mode ring_flash): per block
// kernels::attention_forward and a log-sum-exp merge into the running (out, lse); the backward
// recomputes every block with kernels::attention_backward from the final out and lse, so the
// blocks' gradients are exact pieces of the serial gradient, and dK, dV ride the ring home.
#include <cmath>
#include <string>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/factory.h"
#include "kernels/kernels.h"
#include "parallel/sequence/attention.h"
#include "parallel/sequence/problem.h"
#include "parallel/sequence/ring_exchange.h"

namespace tessera::parallel::sequence {
namespace {

using autograd::SavedTensor;
using detail::Problem;

constexpr const char* kOp = "ring_flash_attention";

Tensor rows(const Tensor& t, const Segment& s) { return t.narrow(2, s.local, s.length); }

// Merges a block's normalised output and lse (queries of one segment against some keys) into the
// running ones of the same rows, in place (f32 views): lse = log(e^lse + e^lse_b), and each output
// weighted by e^(its lse - lse). Rows no key has reached yet (-inf) stay zero, never NaN.
void merge_block(const Tensor& out, const Tensor& lse, const Tensor& out_b, const Tensor& lse_b) {
  const TensorOptions f32{.dtype = DType::f32, .device = lse.device()};
  const Tensor neg_inf = full({}, -INFINITY, f32), zero = zeros({}, f32);
  const Tensor m = maximum(lse, lse_b);
  const Tensor seen = gt(m, neg_inf);
  const Tensor m0 = where(seen, m, zero);
  const Tensor wa = exp(lse - m0), wb = exp(lse_b - m0);
  const Tensor sum = wa + wb;  // >= 1 where seen: one of the two is e^0
  const Tensor inv = where(seen, reciprocal(sum), zero);
  out.copy_(out * unsqueeze(wa * inv, -1) + to_dtype(out_b, DType::f32) * unsqueeze(wb * inv, -1));
  lse.copy_(where(seen, m0 + log(sum), neg_inf));
}

struct Forward {
  Tensor out;  // (B, H, C, D), q's dtype
  Tensor lse;  // (B, H, C) f32
};

Forward forward(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v) {
  autograd::NoGradGuard no_grad;
  const TensorOptions f32{.dtype = DType::f32, .device = q.device()};
  const TensorOptions same{.dtype = q.dtype(), .device = q.device()};
  Tensor out = zeros({p.B, p.H, p.C, p.D}, f32), lse = full({p.B, p.H, p.C}, -INFINITY, f32);
  ring_visit(p.group, {k.contiguous(), v.contiguous()},
             [&](int owner, const std::vector<Tensor>& kv) {
               for (const AttentionBlock& b : p.blocks(owner)) {
                 Tensor out_b = empty({p.B, p.H, b.q.length, p.D}, same);
                 Tensor lse_b = empty({p.B, p.H, b.q.length}, f32);
                 kernels::attention_forward(rows(q, b.q), rows(kv[0], b.k), rows(kv[1], b.k),
                                            p.mask_of(b.k), p.block_options(b), out_b, lse_b);
                 merge_block(rows(out, b.q), lse.narrow(2, b.q.local, b.q.length), out_b, lse_b);
                 if (p.stats) {
                   p.stats->blocks += 1;
                   p.stats->score_elements += p.B * p.H * score_elements(b);
                 }
               }
             });
  return {out.to(q.dtype()), lse};
}

struct RingFlashBackward final : autograd::Node {
  Problem p;
  SavedTensor q, k, v;  // (B, H, C, D)
  SavedTensor out;      // (B, H, C, D), the detached final output
  Tensor lse;           // (B, H, C) f32, the final log-sum-exp
  std::string name() const override { return "RingFlashAttentionBackward"; }
  bool always_run() const override { return true; }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor qv = q.unpack(kOp), kv = k.unpack(kOp), vv = v.unpack(kOp), ov = out.unpack(kOp);
    autograd::NoGradGuard no_grad;
    const Tensor go = grads[0].to(qv.dtype());
    const TensorOptions f32{.dtype = DType::f32, .device = qv.device()};
    const TensorOptions same{.dtype = qv.dtype(), .device = qv.device()};
    const Shape shape{p.B, p.H, p.C, p.D};
    Tensor dq = zeros(shape, f32);
    std::vector<Tensor> dkv = ring_visit_accumulate(
        p.group, {kv.contiguous(), vv.contiguous()},
        [&](int owner, const std::vector<Tensor>& chunk) {
          std::vector<Tensor> sums{zeros(shape, f32), zeros(shape, f32)};
          for (const AttentionBlock& b : p.blocks(owner)) {
            const Shape qs{p.B, p.H, b.q.length, p.D}, ks{p.B, p.H, b.k.length, p.D};
            Tensor gq = empty(qs, same), gk = empty(ks, same), gv = empty(ks, same);
            kernels::attention_backward(rows(qv, b.q), rows(chunk[0], b.k), rows(chunk[1], b.k),
                                        rows(ov, b.q), lse.narrow(2, b.q.local, b.q.length),
                                        rows(go, b.q), p.mask_of(b.k), p.block_options(b), gq, gk,
                                        gv);
            add_(rows(dq, b.q), gq);
            add_(rows(sums[0], b.k), gk);
            add_(rows(sums[1], b.k), gv);
          }
          return sums;
        });
    std::vector<Tensor> result(3);
    if (needs_input_grad(0)) result[0] = dq.to(qv.dtype());
    if (needs_input_grad(1)) result[1] = dkv[0].to(qv.dtype());
    if (needs_input_grad(2)) result[2] = dkv[1].to(qv.dtype());
    return result;
  }

  void release_saved() override {
    q.reset();
    k.reset();
    v.reset();
    out.reset();
    lse = Tensor();
    p.mask = Tensor();
  }
};

}  // namespace

RingFlashOutput ring_flash_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                     const SequenceAttentionArgs& args) {
  Problem p = detail::make_problem(kOp, q, k, v, args);
  detail::reserve_dropout(p, args);
  Forward f = forward(p, q, k, v);
  if (auto node = autograd::make_node<RingFlashBackward>({&q, &k, &v})) {
    node->p = p;
    node->p.stats = nullptr;
    node->q = SavedTensor(q);
    node->k = SavedTensor(k);
    node->v = SavedTensor(v);
    node->out = SavedTensor(f.out.detach());
    node->lse = f.lse;
    autograd::set_history(f.out, node);
    node->record_output(f.out);
  }
  return {f.out, f.lse};
}

}  // namespace tessera::parallel::sequence

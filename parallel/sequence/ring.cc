// The Colossal-AI paper's ring self-attention (attention.h, mode ring): this rank's (B, H, C, T)
// scores are built from K chunks passed around the ring, masked at global positions, softmaxed and
// dropped out, and multiplied by V chunks passed around the ring. The backward walks the ring
// twice: V with dV (dP = dO V^T needs every V before the softmax backward), then K with dK.
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

constexpr const char* kOp = "ring_attention";

// The columns of a (B, H, C, T) score tensor that a key segment fills, and the rows of a
// (B, H, C, D) chunk it holds.
Tensor columns(const Tensor& scores, const Segment& k) {
  return scores.narrow(3, k.global, k.length);
}
Tensor rows(const Tensor& chunk, const Segment& k) { return chunk.narrow(2, k.local, k.length); }

// Which of this rank's (query, key) scores are visible, (B or 1, 1, C, T) bool: the padding mask
// and the causal diagonal at global positions; undefined when nothing is hidden.
Tensor visible(const Problem& p, Device device) {
  if (!p.causal && !p.mask.defined()) return Tensor();
  Tensor vis;
  if (p.causal) {
    std::vector<int64_t> query(size_t(p.C));
    for (const Segment& s : p.segments()) {
      for (int64_t i = 0; i < s.length; ++i) query[size_t(s.local + i)] = s.global + i;
    }
    const Tensor q_pos = from_vector(query, {p.C, 1}, device);
    const Tensor k_pos =
        arange(0, double(p.T), 1.0, {.dtype = DType::i64, .device = device}).view({1, p.T});
    vis = le(k_pos, q_pos).view({1, 1, p.C, p.T});
  }
  if (p.mask.defined()) {
    const Tensor keys = p.mask.view({p.B, 1, 1, p.T});
    vis = vis.defined() ? logical_and(keys, vis) : keys.expand({p.B, 1, p.C, p.T});
  }
  return vis;
}

// The dropout factors of this rank's (B, H, C, T) probabilities: 1 / (1 - p) where the serial
// layer's mask keeps (query, key), else 0. One kernel call per (batch, head, query segment), whose
// rows are consecutive counters of the serial draw (kernels/attention_dropout.h).
Tensor dropout_factors(const Problem& p, const TensorOptions& to) {
  Tensor factors = empty({p.B, p.H, p.C, p.T}, to);
  const kernels::AttentionDropoutGrid grid = p.dropout_grid();
  for (const Segment& s : p.segments()) {
    const Tensor ones_block = ones({s.length, p.T}, to);
    for (int64_t b = 0; b < p.B; ++b) {
      for (int64_t h = 0; h < p.H; ++h) {
        const uint64_t first = kernels::attention_dropout_index(grid, b * p.H + h, s.global, 0);
        // The attention kernels keep u >= p in f32; the dropout kernel compares against p as a
        // double, so hand it the f32 value.
        kernels::dropout(ones_block, double(p.dropout_p), p.seed, first,
                         factors.select(0, b).select(0, h).narrow(0, s.local, s.length));
      }
    }
  }
  return factors;
}

struct Forward {
  Tensor out;    // (B, H, C, D)
  Tensor probs;  // (B, H, C, T), softmax of the masked scores (before dropout)
};

Forward forward(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v) {
  autograd::NoGradGuard no_grad;
  const TensorOptions same{.dtype = q.dtype(), .device = q.device()};
  Tensor scores = empty({p.B, p.H, p.C, p.T}, same);
  ring_visit(p.group, {k.contiguous()}, [&](int owner, const std::vector<Tensor>& chunk) {
    for (const Segment& s : rank_segments(p.layout, p.T, p.size, owner)) {
      columns(scores, s).copy_(matmul(q, transpose(rows(chunk[0], s), 2, 3)));
    }
    if (p.stats) {
      p.stats->blocks += 1;
      p.stats->score_elements += p.B * p.H * p.C * p.C;
    }
  });
  scores = mul(scores, double(p.scale));
  const Tensor vis = visible(p, q.device());
  if (vis.defined()) scores = where(vis, scores, full({}, -INFINITY, same));
  Tensor probs = softmax(scores, -1);
  if (vis.defined()) {  // a row with no visible key gives zeros (softmax of all -inf is NaN)
    const Tensor seen =
        gt(amax(to_dtype(vis, DType::f32), {-1}, true), zeros({}, {.device = q.device()}));
    probs = where(seen, probs, zeros({}, same));
  }
  const Tensor dropped = p.dropout_p > 0.0f ? mul(probs, dropout_factors(p, same)) : probs;
  Tensor out = zeros({p.B, p.H, p.C, p.D}, {.dtype = DType::f32, .device = q.device()});
  ring_visit(p.group, {v.contiguous()}, [&](int owner, const std::vector<Tensor>& chunk) {
    for (const Segment& s : rank_segments(p.layout, p.T, p.size, owner)) {
      add_(out, matmul(columns(dropped, s), rows(chunk[0], s)));
    }
  });
  return {out.to(q.dtype()), probs};
}

struct RingBackward final : autograd::Node {
  Problem p;
  SavedTensor q, k, v;  // (B, H, C, D)
  Tensor probs;         // (B, H, C, T), private to this node
  std::string name() const override { return "RingAttentionBackward"; }
  bool always_run() const override { return true; }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor qv = q.unpack(kOp), kv = k.unpack(kOp), vv = v.unpack(kOp);
    autograd::NoGradGuard no_grad;
    const Tensor go = grads[0].to(qv.dtype());
    const TensorOptions same{.dtype = qv.dtype(), .device = qv.device()};
    const TensorOptions f32{.dtype = DType::f32, .device = qv.device()};
    const Shape shape{p.B, p.H, p.C, p.D};
    const Tensor factors = p.dropout_p > 0.0f ? dropout_factors(p, same) : Tensor();
    const Tensor dropped = factors.defined() ? mul(probs, factors) : probs;
    // Walk 1: dP (through the dropout) = dO V^T column block by column block; dV = P_dropped^T dO.
    Tensor dprobs = empty(probs.shape(), same);
    std::vector<Tensor> dv = ring_visit_accumulate(
        p.group, {vv.contiguous()}, [&](int owner, const std::vector<Tensor>& chunk) {
          Tensor sum = zeros(shape, f32);
          for (const Segment& s : rank_segments(p.layout, p.T, p.size, owner)) {
            columns(dprobs, s).copy_(matmul(go, transpose(rows(chunk[0], s), 2, 3)));
            rows(sum, s).copy_(matmul(transpose(columns(dropped, s), 2, 3), go));
          }
          return std::vector<Tensor>{sum};
        });
    if (factors.defined()) dprobs = mul(dprobs, factors);
    Tensor dscores = empty(probs.shape(), same);
    kernels::softmax_backward(probs, dprobs, dscores);
    dscores = mul(dscores, double(p.scale));
    // Walk 2: dQ = dS K column block by column block; dK = dS^T Q.
    Tensor dq = zeros(shape, f32);
    std::vector<Tensor> dk = ring_visit_accumulate(
        p.group, {kv.contiguous()}, [&](int owner, const std::vector<Tensor>& chunk) {
          Tensor sum = zeros(shape, f32);
          for (const Segment& s : rank_segments(p.layout, p.T, p.size, owner)) {
            add_(dq, matmul(columns(dscores, s), rows(chunk[0], s)));
            rows(sum, s).copy_(matmul(transpose(columns(dscores, s), 2, 3), qv));
          }
          return std::vector<Tensor>{sum};
        });
    std::vector<Tensor> result(3);
    if (needs_input_grad(0)) result[0] = dq.to(qv.dtype());
    if (needs_input_grad(1)) result[1] = dk[0].to(qv.dtype());
    if (needs_input_grad(2)) result[2] = dv[0].to(qv.dtype());
    return result;
  }

  void release_saved() override {
    q.reset();
    k.reset();
    v.reset();
    probs = Tensor();
    p.mask = Tensor();
  }
};

}  // namespace

Tensor ring_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                      const SequenceAttentionArgs& args) {
  Problem p = detail::make_problem(kOp, q, k, v, args);
  detail::reserve_dropout(p, args);
  Forward f = forward(p, q, k, v);
  if (auto node = autograd::make_node<RingBackward>({&q, &k, &v})) {
    node->p = p;
    node->p.stats = nullptr;
    node->q = SavedTensor(q);
    node->k = SavedTensor(k);
    node->v = SavedTensor(v);
    node->probs = f.probs;
    autograd::set_history(f.out, node);
    node->record_output(f.out);
  }
  return f.out;
}

}  // namespace tessera::parallel::sequence

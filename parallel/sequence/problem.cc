// Validation and per-block options of sequence-parallel attention (problem.h).
#include "parallel/sequence/problem.h"

#include <cmath>

#include "core/error.h"

namespace tessera::parallel::sequence::detail {

kernels::AttentionDropoutGrid Problem::dropout_grid() const {
  kernels::AttentionDropoutGrid g;
  g.offset = offset;
  g.H = H;
  g.heads = heads;
  g.head_offset = head_offset;
  g.rows = g.cols = T;
  return g;
}

kernels::AttentionOptions Problem::block_options(const AttentionBlock& block) const {
  kernels::AttentionOptions o;
  o.causal = block.kind == BlockKind::causal;
  o.scale = scale;
  o.dropout_p = dropout_p;
  if (dropout_p > 0.0f) {
    o.seed = seed;
    o.offset = offset;
    o.dropout_heads = heads;
    o.dropout_head_offset = head_offset;
    o.dropout_rows = o.dropout_cols = T;
    o.dropout_row_offset = block.q.global;
    o.dropout_col_offset = block.k.global;
  }
  return o;
}

Tensor Problem::mask_of(const Segment& k) const {
  return mask.defined() ? mask.narrow(1, k.global, k.length) : Tensor();
}

Problem make_problem(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                     const SequenceAttentionArgs& args) {
  TS_CHECK(q.defined() && k.defined() && v.defined(), op, "expected defined q, k and v");
  TS_CHECK(q.dim() == 4 && k.shape() == q.shape() && v.shape() == q.shape(), op,
           "expected q, k and v of one shape (B, H, T/S, D) (self-attention over this rank's "
           "positions), got q ",
           shape_str(q.shape()), ", k ", shape_str(k.shape()), ", v ", shape_str(v.shape()));
  TS_CHECK(is_floating(q.dtype()) && k.dtype() == q.dtype() && v.dtype() == q.dtype(), op,
           "expected q, k and v of one floating dtype, got ", q.describe(), ", ", k.describe(),
           ", ", v.describe());
  TS_CHECK(k.device() == q.device() && v.device() == q.device(), op,
           "expected q, k and v on one device, got ", q.describe(), ", ", k.describe(), ", ",
           v.describe());
  Problem p;
  p.group = args.group && args.group->size() > 1 ? args.group.get() : nullptr;
  if (p.group) {
    TS_CHECK(p.group->supports(q.device().type), op, "expected tensors on the ",
             p.group->backend(), " group '", p.group->name(), "' device type, got ", q.describe());
    p.size = p.group->size();
    p.rank = p.group->rank();
  }
  p.B = q.size(0), p.H = q.size(1), p.C = q.size(2), p.D = q.size(3);
  p.T = p.C * p.size;
  p.layout = args.layout;
  check_split(op, p.layout, p.T, p.size);
  p.causal = args.causal;
  TS_CHECK(!args.scale.has_value() || std::isfinite(*args.scale), op,
           "expected a finite scale, got ", args.scale.value_or(0.0));
  // As scaled_dot_product_attention resolves it, so both modes round the same scale.
  p.scale = float(args.scale.value_or(p.D > 0 ? 1.0 / std::sqrt(double(p.D)) : 1.0));
  const Tensor& mask = args.key_padding_mask;
  if (mask.defined()) {
    const Shape want{p.B, p.T};
    TS_CHECK(mask.dtype() == DType::b8 && mask.shape() == want && mask.device() == q.device(), op,
             "expected key_padding_mask ", shape_str(want),
             " bool (the whole sequence, serial order) on ", q.device().str(), ", got ",
             mask.describe());
    p.mask = mask;
  }
  TS_CHECK(args.dropout_p >= 0.0 && args.dropout_p < 1.0, op, "expected dropout_p in [0, 1), got ",
           args.dropout_p);
  p.dropout_p = float(args.dropout_p);
  p.heads = args.total_heads > 0 ? args.total_heads : p.H;
  p.head_offset = args.head_offset;
  TS_CHECK(p.head_offset >= 0 && p.head_offset + p.H <= p.heads, op, "expected heads [",
           p.head_offset, ", ", p.head_offset + p.H, ") inside total_heads ", p.heads);
  p.stats = args.stats;
  return p;
}

void reserve_dropout(Problem& p, const SequenceAttentionArgs& args) {
  if (p.dropout_p <= 0.0f) return;
  Generator& g = args.gen ? *args.gen : default_generator();
  p.offset = g.reserve(uint64_t(p.B * p.heads * p.T * p.T));
  p.seed = g.seed();
}

}  // namespace tessera::parallel::sequence::detail

// Multi-head attention construction and forward (see attention.h).
#include "models/nn/attention.h"

#include <cmath>

#include "autograd/ops.h"
#include "models/nn/factory.h"

namespace tessera::nn {

double residual_init_std(double init_std, int64_t layers) {
  return layers > 0 ? init_std / std::sqrt(2.0 * double(layers)) : init_std;
}

namespace {

// Under 1D tensor parallelism each rank computes n_heads / P of the heads.
AttentionSplit split_1d(const BuildContext& ctx) {
  if (!ctx.tensor_parallel()) return {};
  return {.head_parts = ctx.tensor_size(), .head_index = ctx.tensor_rank()};
}

}  // namespace

MultiHeadAttention::MultiHeadAttention(const AttentionSpec& spec, const BuildContext& ctx)
    : MultiHeadAttention(spec, ctx, split_1d(ctx)) {}

MultiHeadAttention::MultiHeadAttention(const AttentionSpec& spec, const BuildContext& ctx,
                                       const AttentionSplit& split)
    : spec_(spec), split_(split), sequence_(ctx) {
  TS_CHECK(spec.d_model > 0 && spec.n_heads > 0 && spec.d_model % spec.n_heads == 0,
           "MultiHeadAttention",
           "expected d_model divisible by n_heads (both positive), got d_model ", spec.d_model,
           " and n_heads ", spec.n_heads);
  TS_CHECK(spec.attn_dropout >= 0.0 && spec.attn_dropout < 1.0, "MultiHeadAttention",
           "expected attn_dropout in [0, 1), got ", spec.attn_dropout);
  TS_CHECK(spec.n_heads % split.head_parts == 0, "MultiHeadAttention", "expected n_heads ",
           spec.n_heads, " divisible by the tensor-parallel size ", split.head_parts);
  local_heads_ = spec.n_heads / split.head_parts;
  const int64_t c = spec.d_model;
  c_attn_ = register_module("c_attn", make_linear({.in_features = c,
                                                   .out_features = 3 * c,
                                                   .bias = spec.bias,
                                                   .init_std = spec.init_std,
                                                   .fused_blocks = 3},
                                                  ctx, ParallelStyle::column));
  c_proj_ = register_module(
      "c_proj", make_linear({.in_features = c,
                             .out_features = c,
                             .bias = spec.bias,
                             .init_std = residual_init_std(spec.init_std, spec.residual_layers)},
                            ctx, ParallelStyle::row));
  resid_dropout_ = register_module("resid_dropout", std::make_shared<Dropout>(spec.resid_dropout));
}

Tensor MultiHeadAttention::forward(const Tensor& x, const Tensor& key_padding_mask) {
  const int64_t h = local_heads_, d = spec_.d_model / spec_.n_heads;
  const int64_t width = c_attn_->weight().size(1);  // C, or a 2D twin's C / q
  TS_CHECK(x.defined() && x.dim() == 3 && x.size(2) == width, "MultiHeadAttention",
           "expected input (B, T, ", width, "), got ", x.defined() ? x.describe() : "undefined");
  Tensor qkv = c_attn_->forward(x);  // (B, T, 3 H D): this rank's heads' q | k | v
  // T from the projection: under sequence parallelism x is a shard (B, T/P, C) and c_attn gathers.
  const int64_t b = qkv.size(0), t = qkv.size(1);
  Tensor heads = permute(reshape(qkv, {b, t, 3, h, d}), {2, 0, 3, 1, 4});  // (3, B, H, T, D)
  // q, k, v as views of one split: its backward writes the three gradients into one (3, B, H, T,
  // D) tensor in a pass, where three selects would each scatter into zeros of that size and
  // their sum take two more passes.
  const std::vector<Tensor> parts = tessera::split(heads, 1, 0);
  const Tensor q = squeeze(parts[0], 0), k = squeeze(parts[1], 0), v = squeeze(parts[2], 0);
  AttentionArgs args;
  args.total_heads = spec_.n_heads;  // dropout draws the whole layer's mask at these heads
  args.head_offset = int64_t(split_.head_index) * h;
  args.key_padding_mask = key_padding_mask;
  if (split_.batch_parts > 1 && key_padding_mask.defined()) {
    TS_CHECK(key_padding_mask.dim() == 2 && key_padding_mask.size(0) == b * split_.batch_parts,
             type_name(), "expected the whole batch's key_padding_mask (", b * split_.batch_parts,
             ", T) for a batch chunk of ", b, ", got ", key_padding_mask.describe());
    args.key_padding_mask = key_padding_mask.narrow(0, int64_t(split_.batch_index) * b, b);
  }
  args.causal = spec_.causal;
  args.dropout_p = is_training() ? spec_.attn_dropout : 0.0;
  // The whole layer's (B, heads, T, S) draw: this batch chunk's rows are one run of its counters,
  // over the whole sequence when x holds a sequence shard.
  Generator rows;
  if (args.dropout_p > 0.0 && split_.batch_parts > 1) {
    const int64_t whole = sequence_.on() ? t * sequence_.size() : t;
    rows = batch_chunk_generator(uint64_t(b * spec_.n_heads * whole * whole), split_.batch_parts,
                                 split_.batch_index);
    args.gen = &rows;
  }
  Tensor y;
  if (sequence_.on()) {
    // The sequence is split over the sequence group: the ranks' attention crosses them (the
    // mask is the whole sequence's; dropout by global (query, key) position).
    parallel::sequence::SequenceAttentionArgs sa = sequence_.attention_args();
    sa.causal = args.causal;
    sa.key_padding_mask = args.key_padding_mask;
    sa.dropout_p = args.dropout_p;
    sa.gen = args.gen;
    sa.total_heads = args.total_heads;
    sa.head_offset = args.head_offset;
    y = parallel::sequence::attention(q, k, v, sa);  // (B, H, T/S, D)
  } else {
    y = scaled_dot_product_attention(q, k, v, args);  // (B, H, T, D)
  }
  y = reshape(transpose(y, 1, 2), {b, t, h * d});  // (B, T, H D)
  return resid_dropout_->forward(c_proj_->forward(y));
}

}  // namespace tessera::nn

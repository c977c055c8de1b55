// Transformer block construction and forward, with activation checkpointing (see block.h).
#include "models/nn/block.h"

#include "models/nn/sequence_shard.h"

#include "autograd/ops.h"
#include "models/nn/factory.h"
#include "models/nn/parallel/sequence_1d.h"

namespace tessera::nn {

Block::Block(const BlockSpec& spec, const BuildContext& ctx) : spec_(spec) {
  const SequenceSplit seq(ctx);
  const LayerNormSpec ln{.dim = spec.d_model, .eps = spec.ln_eps, .grad_group = seq.group()};
  ln_1_ = register_module("ln_1", make_layer_norm(ln, ctx));
  attn_ = register_module("attn", make_attention({.d_model = spec.d_model,
                                                  .n_heads = spec.n_heads,
                                                  .bias = spec.bias,
                                                  .causal = spec.causal,
                                                  .attn_dropout = spec.attn_dropout,
                                                  .resid_dropout = spec.dropout,
                                                  .init_std = spec.init_std,
                                                  .residual_layers = spec.residual_layers},
                                                 ctx));
  ln_2_ = register_module("ln_2", make_layer_norm(ln, ctx));
  mlp_ = register_module("mlp", make_mlp({.d_model = spec.d_model,
                                          .hidden = spec.mlp_hidden,
                                          .gelu = spec.gelu,
                                          .bias = spec.bias,
                                          .dropout = spec.dropout,
                                          .init_std = spec.init_std,
                                          .residual_layers = spec.residual_layers},
                                         ctx));
  // Every Dropout below: inside a block they all drop the residual stream (attention's and the
  // MLP's output projections), which sequence parallelism keeps in shards and 2D in blocks.
  if (seq.on() || ctx.tensor_2d() || SequenceShard(ctx).on())
    set_dropout_chunks(*this, residual_dropout_chunk(ctx));
}

Tensor Block::forward_layers(const Tensor& x, const Tensor& mask) {
  if (spec_.pre_ln) {
    Tensor h = x + attn_->forward(ln_1_->forward(x), mask);  // (B, T, C)
    return h + mlp_->forward(ln_2_->forward(h));
  }
  Tensor h = ln_1_->forward(x + attn_->forward(x, mask));  // (B, T, C)
  return ln_2_->forward(h + mlp_->forward(h));
}

Tensor Block::forward(const Tensor& x, const Tensor& key_padding_mask) {
  // Without grad mode there are no activations to save, so checkpointing would only cost time.
  if (!spec_.checkpoint || !autograd::is_grad_enabled()) return forward_layers(x, key_padding_mask);
  // The mask is a bool tensor with no gradient: captured by the closure, not a checkpoint input.
  auto fn = [this, key_padding_mask](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{forward_layers(in[0], key_padding_mask)};
  };
  return checkpoint(fn, {x})[0];
}

}  // namespace tessera::nn

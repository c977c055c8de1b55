// GPT-2 decoder construction, forward, loss (see gpt.h).
#include "models/gpt/gpt.h"

#include "autograd/ops.h"

namespace tessera::gpt {

GPT::GPT(const GPTConfig& config, const nn::BuildContext& ctx) : config_(config), seq_(ctx) {
  config.validate();
  const GPTConfig& c = config_;
  // forward() pads a window to a multiple of P, which must still fit the position table.
  TS_CHECK(c.context_length % seq_.parts() == 0, "GPT", "expected context_length ",
           c.context_length, " divisible by parallel.tensor.size ", seq_.parts(),
           " under parallel.tensor.sequence_parallel");
  wte_ = register_module(
      "wte",
      nn::make_embedding({.num_embeddings = c.vocab_size, .dim = c.d_model, .init_std = c.init_std},
                         ctx, nn::ParallelStyle::vocab));
  wpe_ = register_module(
      "wpe",
      nn::make_embedding(
          {.num_embeddings = c.context_length, .dim = c.d_model, .init_std = c.init_std}, ctx));
  drop_ = register_module("drop", std::make_shared<nn::Dropout>(c.dropout, seq_.dropout_chunk()));
  h_ = register_module("h", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < c.n_layers; ++i) {
    h_->push_back(nn::make_block({.d_model = c.d_model,
                                  .n_heads = c.n_heads,
                                  .mlp_hidden = c.mlp_hidden,
                                  .causal = true,
                                  .pre_ln = true,
                                  .ln_eps = c.ln_eps,
                                  .gelu = "tanh",
                                  .bias = c.bias,
                                  .dropout = c.dropout,
                                  .attn_dropout = c.attn_dropout,
                                  .init_std = c.init_std,
                                  .residual_layers = c.n_layers,
                                  .checkpoint = c.checkpoint},
                                 ctx));
  }
  ln_f_ = register_module(
      "ln_f", nn::make_layer_norm({.dim = c.d_model, .eps = c.ln_eps, .grad_group = seq_.group()}));
  const nn::LMHeadSpec head{
      .d_model = c.d_model, .vocab_size = c.vocab_size, .bias = false, .init_std = c.init_std};
  lm_head_ = register_module(
      "lm_head", c.tie_embeddings
                     ? nn::make_tied_lm_head(head, *wte_, ctx, nn::ParallelStyle::vocab)
                     : nn::make_lm_head(head, ctx, nn::ParallelStyle::vocab));
}

Tensor GPT::hidden(const Tensor& ids) {
  TS_CHECK(ids.defined() && ids.dim() == 2 && ids.size(1) >= 1 &&
               ids.size(1) <= config_.context_length &&
               (ids.dtype() == DType::i64 || ids.dtype() == DType::i32),
           "GPT", "expected token ids (B, T) i32/i64 with 1 <= T <= ", config_.context_length,
           ", got ", ids.defined() ? ids.describe() : "undefined");
  const int64_t t = ids.size(1);
  seq_.check_length("GPT", t);
  Tensor pos = arange(0, double(t), 1.0, {.dtype = DType::i64, .device = ids.device()});  // (T)
  // Sequence parallel: the token embedding gives this rank's rows (B, T/P, C), and the positions,
  // looked up whole, are cut to the same rows (T/P, C).
  Tensor x = drop_->forward(wte_->forward(ids) + seq_.scatter(wpe_->forward(pos), 0));
  for (size_t i = 0; i < h_->size(); ++i) x = h_->at<nn::Block>(i)->forward(x);
  return ln_f_->forward(x);  // (B, T, C); sequence parallel: (B, T/P, C)
}

Tensor GPT::forward(const Tensor& ids) {
  const int64_t t = ids.defined() && ids.dim() == 2 ? ids.size(1) : 0;
  const int64_t pad = (seq_.parts() - t % seq_.parts()) % seq_.parts();
  if (pad == 0 || t > config_.context_length) return lm_head_->forward(hidden(ids));  // (B, T, V)
  // Sequence parallelism splits T over the tensor group, so a window of any length (generation)
  // is padded on the right to a multiple of P (it fits: context_length is one). The model is
  // causal, so the first T positions' logits never see the padding. Not in training, where the
  // dropout masks would be drawn over the padded shape and differ from the serial model's.
  TS_CHECK(!is_training(), "GPT", "expected the sequence length T ", t,
           " divisible by parallel.tensor.size ", seq_.parts(),
           " in training mode (parallel.tensor.sequence_parallel splits T over the tensor group)");
  Tensor padded =
      cat({ids, zeros({ids.size(0), pad}, {.dtype = ids.dtype(), .device = ids.device()})}, 1);
  return narrow(lm_head_->forward(hidden(padded)), 1, 0, t);  // (B, T, V)
}

Tensor GPT::loss(const Tensor& ids, const Tensor& targets) {
  TS_CHECK(targets.defined() && targets.shape() == ids.shape(), "GPT.loss",
           "expected targets of the ids' shape ", shape_str(ids.shape()), ", got ",
           targets.defined() ? targets.describe() : "undefined");
  Tensor tgt = targets.dtype() == DType::i64 ? targets : targets.to(DType::i64);
  return lm_head_->loss(hidden(ids), tgt);
}

}  // namespace tessera::gpt

// GPT-2 decoder construction, forward, loss (see gpt.h).
#include "models/gpt/gpt.h"

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "models/nn/parallel/linear_3d.h"

namespace tessera::gpt {

GPT::GPT(const GPTConfig& config, const nn::BuildContext& ctx)
    : config_(config),
      seq_(ctx),
      split2d_(ctx),
      cube_side_(ctx.tensor_3d() ? ctx.cube("GPT").q() : 1),
      sp_(ctx) {
  config.validate();
  const GPTConfig& c = config_;
  // forward() pads a window to a multiple of P, which must still fit the position table.
  TS_CHECK(c.context_length % seq_.parts() == 0, "GPT", "expected context_length ",
           c.context_length, " divisible by parallel.tensor.size ", seq_.parts(),
           " under parallel.tensor.sequence_parallel");
  // Parameter counts that balance the "parameters" partition (embeddings on the first stage, the
  // final norm and an untied head on the last).
  const int64_t d = c.d_model, biases = c.bias ? 4 * d + c.mlp_hidden + d : 0;
  const int64_t block_params = 4 * d * d + 2 * d * c.mlp_hidden + biases + 4 * d;
  stage_ = nn::PipelineStage::plan(ctx, c.n_layers, block_params,
                                   (c.vocab_size + c.context_length) * d,
                                   2 * d + (c.tie_embeddings ? 0 : c.vocab_size * d));
  // Layers this rank does not hold are built aside and dropped, in the serial order, so the
  // generator draws every held weight at its serial offset.
  auto make_wte = [&] {
    return nn::make_embedding(
        {.num_embeddings = c.vocab_size, .dim = c.d_model, .init_std = c.init_std}, ctx,
        nn::ParallelStyle::vocab);
  };
  if (stage_.holds_embeddings() || (stage_.holds_head() && c.tie_embeddings)) {
    wte_ = register_module("wte", make_wte());
    stage_.hold("wte", *wte_);
  } else {
    stage_.skip("wte", make_wte);
  }
  auto make_wpe = [&] {
    return nn::make_embedding(
        {.num_embeddings = c.context_length, .dim = c.d_model, .init_std = c.init_std}, ctx);
  };
  if (stage_.holds_embeddings()) {
    wpe_ = register_module("wpe", make_wpe());
    stage_.hold("wpe", *wpe_);
  } else {
    stage_.skip("wpe", make_wpe);
  }
  drop_ = register_module("drop", nn::make_dropout(c.dropout, ctx));
  h_ = register_module("h", std::make_shared<nn::ModuleList>());
  auto make_block = [&] {
    return nn::make_block({.d_model = c.d_model,
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
                          ctx);
  };
  block_slot_ = stage_.build_blocks("h", *h_, c.n_layers, make_block);
  auto make_ln_f = [&] {
    return nn::make_layer_norm({.dim = c.d_model, .eps = c.ln_eps, .grad_group = seq_.group()},
                               ctx);
  };
  const nn::LMHeadSpec head{
      .d_model = c.d_model, .vocab_size = c.vocab_size, .bias = false, .init_std = c.init_std};
  auto make_head = [&]() -> std::shared_ptr<nn::LMHead> {
    return c.tie_embeddings ? nn::make_tied_lm_head(head, *wte_, ctx, nn::ParallelStyle::vocab)
                            : nn::make_lm_head(head, ctx, nn::ParallelStyle::vocab);
  };
  if (stage_.holds_head()) {
    ln_f_ = register_module("ln_f", make_ln_f());
    stage_.hold("ln_f", *ln_f_);
    lm_head_ = register_module("lm_head", make_head());
    stage_.hold("lm_head", *lm_head_);
  } else {
    stage_.skip("ln_f", make_ln_f);
    if (!c.tie_embeddings) stage_.skip("lm_head", make_head);  // a tied head draws nothing
  }
}

Tensor GPT::embed(const Tensor& ids) {
  TS_CHECK(ids.defined() && ids.dim() == 2 && ids.size(1) >= 1 &&
               ids.size(1) <= config_.context_length &&
               (ids.dtype() == DType::i64 || ids.dtype() == DType::i32),
           "GPT", "expected token ids (B, T) i32/i64 with 1 <= T <= ", config_.context_length,
           ", got ", ids.defined() ? ids.describe() : "undefined");
  const int64_t t = ids.size(1);
  seq_.check_length("GPT", t);
  nn::enter_dropout_unit(0);
  Tensor pos = arange(0, double(t), 1.0, {.dtype = DType::i64, .device = ids.device()});  // (T)
  // Sequence parallel: the token embedding gives this rank's rows (B, T/P, C), and the positions,
  // looked up whole, are cut to the same rows (T/P, C).
  if (sp_.on()) {
    // The paper's sequence parallelism: this rank's positions of every sequence, and their
    // position embeddings looked up at their global index.
    sp_.check_length("GPT", t);
    return drop_->forward(wte_->forward(sp_.take(ids, 1)) + wpe_->forward(sp_.positions(t, ids.device())));
  }
  return drop_->forward(wte_->forward(ids) + seq_.scatter(wpe_->forward(pos), 0));
}

Tensor GPT::run_blocks(Tensor x, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    nn::enter_dropout_unit(i + 1);
    x = h_->at<nn::Block>(size_t(block_slot_[i]))->forward(x);
  }
  return x;
}

Tensor GPT::hidden(const Tensor& ids) {
  TS_CHECK(!stage_.pipelined(), "GPT",
           "expected the whole model on this rank, got pipeline stage ", stage_.rank(), " of ",
           stage_.ranks(), " (use stage_forward)");
  return ln_f_->forward(run_blocks(embed(ids), 0, config_.n_layers));  // sequence parallel: T/P
}

Tensor GPT::stage_forward(int chunk, const Tensor& input, const Tensor& targets) {
  const parallel::pipeline::BlockRange blocks = stage_.chunk_blocks(chunk);
  Tensor x = run_blocks(stage_.first_chunk(chunk) ? embed(input) : input, blocks.begin, blocks.end);
  if (!stage_.last_chunk(chunk)) return x;
  x = ln_f_->forward(x);
  // Sequence parallel: this rank's positions' loss (as loss()), or every position's logits.
  if (!targets.defined()) return sp_.on() ? gather_positions(lm_head_->forward(x)) : lm_head_->forward(x);
  return lm_head_->loss(x, sp_.take(targets.dtype() == DType::i64 ? targets : targets.to(DType::i64), 1));
}

int64_t GPT::window_multiple() const { return seq_.parts() * sp_.multiple(); }

int64_t GPT::batch_padding(int64_t b) const {
  return split2d_.batch_padding(b) + (cube_side_ - b % cube_side_) % cube_side_;
}

Tensor GPT::forward(const Tensor& ids) {
  // 2D tensor parallelism splits the batch over the grid rows (3D over the cube side): outside
  // training a batch that does not split (generation's one prompt) is padded with rows of id 0,
  // whose logits are dropped.
  const int64_t b = ids.defined() && ids.dim() == 2 ? ids.size(0) : 0;
  const int64_t rows = batch_padding(b);
  if (rows > 0 && !is_training()) {
    const Tensor pad = zeros({rows, ids.size(1)}, {.dtype = ids.dtype(), .device = ids.device()});
    return narrow(forward(cat({ids, pad}, 0)), 0, 0, b);  // (B, T, V)
  }
  const int64_t t = ids.defined() && ids.dim() == 2 ? ids.size(1) : 0;
  if (sp_.on()) return sequence_forward(ids);
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
  // Sequence parallel: the mean over this rank's positions. Every rank holds T/S of each row, so
  // the mean over the sequence ranks is the serial mean (the trainer averages over them).
  return lm_head_->loss(hidden(ids), sp_.take(tgt, 1));
}

// Evaluation and generation under the paper's sequence parallelism: a window of any length is
// padded on the right to a multiple of S (the model is causal, so the real positions never see
// the padding), each rank computes its positions' logits, and the ranks' logits are gathered.
Tensor GPT::sequence_forward(const Tensor& ids) {
  const int64_t t = ids.size(1), s = sp_.multiple(), pad = (s - t % s) % s;
  TS_CHECK(pad == 0 || !is_training(), "GPT", "expected the sequence length T ", t,
           " divisible by ", s, " (parallel.sequence ", sp_.size(), " in the ",
           parallel::sequence::layout_name(sp_.layout()), " layout) in training mode");
  TS_CHECK(t + pad <= config_.context_length, "GPT", "expected a window of at most ",
           config_.context_length - pad, " tokens under parallel.sequence ", sp_.size(), ", got ", t);
  const Tensor padded =
      pad == 0 ? ids : cat({ids, zeros({ids.size(0), pad}, {.dtype = ids.dtype(), .device = ids.device()})}, 1);
  autograd::NoGradGuard no_grad;
  return narrow(gather_positions(lm_head_->forward(hidden(padded))), 1, 0, t);  // (B, T, V)
}

Tensor GPT::gather_positions(const Tensor& logits) {
  TS_CHECK(!autograd::is_grad_enabled() || !logits.requires_grad(), "GPT",
           "expected no gradients through the gathered logits (evaluation and generation)");
  return sp_.gather(logits, 1);  // (B, T, V) in serial order
}

}  // namespace tessera::gpt

// BERT embeddings, masked-LM head and pooler (see bert_heads.h).
#include "models/bert/bert_heads.h"

#include "autograd/ops.h"

namespace tessera::bert {

BertEmbeddings::BertEmbeddings(const BertConfig& c, const nn::BuildContext& ctx)
    : max_positions_(c.max_positions), seq_(ctx), sp_(ctx) {
  word_ = register_module(
      "word_embeddings",
      nn::make_embedding({.num_embeddings = c.vocab_size, .dim = c.d_model, .init_std = c.init_std},
                         ctx, nn::ParallelStyle::vocab));
  position_ = register_module(
      "position_embeddings",
      nn::make_embedding(
          {.num_embeddings = c.max_positions, .dim = c.d_model, .init_std = c.init_std}, ctx));
  token_type_ = register_module(
      "token_type_embeddings",
      nn::make_embedding(
          {.num_embeddings = c.type_vocab_size, .dim = c.d_model, .init_std = c.init_std}, ctx));
  layer_norm_ = register_module(
      "layer_norm",
      nn::make_layer_norm({.dim = c.d_model, .eps = c.ln_eps, .grad_group = seq_.group()}, ctx));
  dropout_ = register_module("dropout", nn::make_dropout(c.dropout, ctx));
}

Tensor BertEmbeddings::forward(const Tensor& ids, const Tensor& token_type_ids) {
  TS_CHECK(ids.defined() && ids.dim() == 2 && ids.size(1) >= 1 && ids.size(1) <= max_positions_,
           "Bert", "expected token ids (B, T) with 1 <= T <= ", max_positions_, ", got ",
           ids.defined() ? ids.describe() : "undefined");
  nn::enter_dropout_unit(0);
  const int64_t t = ids.size(1);
  TS_CHECK(!token_type_ids.defined() || token_type_ids.shape() == ids.shape(), "Bert",
           "expected token_type_ids of the ids' shape ", shape_str(ids.shape()), ", got ",
           token_type_ids.describe());
  seq_.check_length("Bert", t);  // before any collective, on every rank
  sp_.check_length("Bert", t);
  if (sp_.on()) {
    // This rank's positions: its ids and token types, the position embeddings at their global
    // index; LayerNorm and dropout (drawn at the chunk's serial counters) on the shard.
    Tensor x =
        word_->forward(sp_.take(ids, 1)) + position_->forward(sp_.positions(t, ids.device()));
    x = token_type_ids.defined() ? x + token_type_->forward(sp_.take(token_type_ids, 1))
                                 : x + token_type_->row(0);
    return dropout_->forward(layer_norm_->forward(x));  // (B, T/S, C)
  }
  Tensor pos = arange(0, double(t), 1.0, {.dtype = DType::i64, .device = ids.device()});  // (T)
  // Sequence parallel: the word embedding gives this rank's rows (B, T/P, C); the positions and
  // token types, looked up whole, are cut to the same rows.
  Tensor x = word_->forward(ids) + seq_.scatter(position_->forward(pos), 0);  // (B, T, C)
  if (token_type_ids.defined()) {
    x = x + seq_.scatter(token_type_->forward(token_type_ids), nn::kSequenceDim);
  } else {
    // Every token has type 0: add row 0 of the table (broadcast), which also trains it; under
    // sequence parallelism its gradient from this shard is summed over the group.
    x = x + seq_.replicate(token_type_->row(0));
  }
  return dropout_->forward(layer_norm_->forward(x));
}

BertMLMHead::BertMLMHead(const BertConfig& c, const nn::Embedding& word_embeddings,
                         const nn::BuildContext& ctx)
    : seq_(ctx) {
  dense_ = register_module(
      "dense",
      nn::make_linear({.in_features = c.d_model, .out_features = c.d_model, .init_std = c.init_std},
                      ctx));
  layer_norm_ =
      register_module("layer_norm", nn::make_layer_norm({.dim = c.d_model, .eps = c.ln_eps}, ctx));
  decoder_ = register_module(
      "decoder",
      nn::make_tied_lm_head(
          {.d_model = c.d_model, .vocab_size = c.vocab_size, .bias = true, .init_std = c.init_std},
          word_embeddings, ctx, nn::ParallelStyle::vocab));
}

Tensor BertMLMHead::transform(const Tensor& hidden) {
  // Sequence parallel: the same (B, T, C) on every rank, so every rank's dense and LayerNorm
  // gradients are the serial ones; the decoder takes this rank's rows and gathers them again
  // (its backward reduce-scatters, scatter's all-gathers the serial gradient of the whole).
  Tensor y = layer_norm_->forward(gelu(dense_->forward(hidden), "none"));  // (B, T, C)
  return seq_.scatter(y, nn::kSequenceDim);
}

Tensor BertMLMHead::forward(const Tensor& hidden) {
  return decoder_->forward(transform(hidden));  // (B, T, V)
}

Tensor BertMLMHead::loss(const Tensor& hidden, const Tensor& labels,
                         const CrossEntropyOptions& opts) {
  return decoder_->loss(transform(hidden), labels, opts);
}

BertPooler::BertPooler(const BertConfig& c, const nn::BuildContext& ctx) : sp_(ctx) {
  dense_ = register_module(
      "dense",
      nn::make_linear({.in_features = c.d_model, .out_features = c.d_model, .init_std = c.init_std},
                      ctx));
}

Tensor BertPooler::forward(const Tensor& hidden) {
  TS_CHECK(hidden.defined() && hidden.dim() == 3 && hidden.size(1) >= 1, "BertPooler",
           "expected hidden states (B, T >= 1, C), got ",
           hidden.defined() ? hidden.describe() : "undefined");
  return tanh(dense_->forward(sp_.first_token(hidden)));  // (B, C)
}

}  // namespace tessera::bert

// BERT embeddings, masked-LM head and pooler (see bert_heads.h).
#include "models/bert/bert_heads.h"

#include "autograd/ops.h"

namespace tessera::bert {

BertEmbeddings::BertEmbeddings(const BertConfig& c, const nn::BuildContext& ctx)
    : max_positions_(c.max_positions) {
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
  layer_norm_ =
      register_module("layer_norm", nn::make_layer_norm({.dim = c.d_model, .eps = c.ln_eps}));
  dropout_ = register_module("dropout", std::make_shared<nn::Dropout>(c.dropout));
}

Tensor BertEmbeddings::forward(const Tensor& ids, const Tensor& token_type_ids) {
  TS_CHECK(ids.defined() && ids.dim() == 2 && ids.size(1) >= 1 && ids.size(1) <= max_positions_,
           "Bert", "expected token ids (B, T) with 1 <= T <= ", max_positions_, ", got ",
           ids.defined() ? ids.describe() : "undefined");
  const int64_t t = ids.size(1);
  Tensor pos = arange(0, double(t), 1.0, {.dtype = DType::i64, .device = ids.device()});  // (T)
  Tensor x = word_->forward(ids) + position_->forward(pos);  // (B, T, C)
  if (token_type_ids.defined()) {
    TS_CHECK(token_type_ids.shape() == ids.shape(), "Bert",
             "expected token_type_ids of the ids' shape ", shape_str(ids.shape()), ", got ",
             token_type_ids.describe());
    x = x + token_type_->forward(token_type_ids);
  } else {
    // Every token has type 0: add row 0 of the table (broadcast), which also trains it.
    x = x + select(token_type_->weight(), 0, 0);
  }
  return dropout_->forward(layer_norm_->forward(x));
}

BertMLMHead::BertMLMHead(const BertConfig& c, const nn::Embedding& word_embeddings,
                         const nn::BuildContext& ctx) {
  dense_ = register_module(
      "dense",
      nn::make_linear({.in_features = c.d_model, .out_features = c.d_model, .init_std = c.init_std},
                      ctx));
  layer_norm_ =
      register_module("layer_norm", nn::make_layer_norm({.dim = c.d_model, .eps = c.ln_eps}));
  decoder_ = register_module(
      "decoder",
      nn::make_tied_lm_head(
          {.d_model = c.d_model, .vocab_size = c.vocab_size, .bias = true, .init_std = c.init_std},
          word_embeddings, ctx, nn::ParallelStyle::vocab));
}

Tensor BertMLMHead::transform(const Tensor& hidden) {
  return layer_norm_->forward(gelu(dense_->forward(hidden), "none"));  // (B, T, C)
}

Tensor BertMLMHead::forward(const Tensor& hidden) {
  return decoder_->forward(transform(hidden));  // (B, T, V)
}

Tensor BertMLMHead::loss(const Tensor& hidden, const Tensor& labels) {
  return decoder_->loss(transform(hidden), labels);
}

BertPooler::BertPooler(const BertConfig& c, const nn::BuildContext& ctx) {
  dense_ = register_module(
      "dense",
      nn::make_linear({.in_features = c.d_model, .out_features = c.d_model, .init_std = c.init_std},
                      ctx));
}

Tensor BertPooler::forward(const Tensor& hidden) {
  TS_CHECK(hidden.defined() && hidden.dim() == 3 && hidden.size(1) >= 1, "BertPooler",
           "expected hidden states (B, T >= 1, C), got ",
           hidden.defined() ? hidden.describe() : "undefined");
  return tanh(dense_->forward(select(hidden, 1, 0)));  // (B, C)
}

}  // namespace tessera::bert

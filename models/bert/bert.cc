// BERT encoder construction, forward and head losses (see bert.h).
#include "models/bert/bert.h"

#include "autograd/ops.h"

namespace tessera::bert {

namespace {

Tensor as_i64(const Tensor& t) { return t.dtype() == DType::i64 ? t : t.to(DType::i64); }

}  // namespace

Bert::Bert(const BertConfig& config, const nn::BuildContext& ctx) : config_(config), seq_(ctx) {
  config.validate();
  const BertConfig& c = config_;
  embeddings_ = register_module("embeddings", std::make_shared<BertEmbeddings>(c, ctx));
  h_ = register_module("h", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < c.n_layers; ++i) {
    h_->push_back(nn::make_block({.d_model = c.d_model,
                                  .n_heads = c.n_heads,
                                  .mlp_hidden = c.mlp_hidden,
                                  .causal = false,
                                  .pre_ln = false,
                                  .ln_eps = c.ln_eps,
                                  .gelu = "none",
                                  .bias = true,
                                  .dropout = c.dropout,
                                  .attn_dropout = c.attn_dropout,
                                  .init_std = c.init_std,
                                  .checkpoint = c.checkpoint},
                                 ctx));
  }
  if (c.mlm_head) {
    mlm_ = register_module(
        "mlm", std::make_shared<BertMLMHead>(c, *embeddings_->word_embeddings(), ctx));
  }
  if (c.num_labels > 0) {
    pooler_ = register_module("pooler", std::make_shared<BertPooler>(c, ctx));
    classifier_ =
        register_module("classifier", nn::make_classification_head({.d_model = c.d_model,
                                                                    .num_classes = c.num_labels,
                                                                    .pooling = nn::Pooling::none,
                                                                    .dropout = c.dropout,
                                                                    .init_std = c.init_std},
                                                                   ctx));
  }
}

Tensor Bert::forward(const Tensor& ids, const Tensor& token_type_ids,
                     const Tensor& attention_mask) {
  // The mask is checked first, so that no rank enters a collective another has refused.
  Tensor mask;  // (B, T) bool, true = attend
  if (attention_mask.defined()) {
    TS_CHECK(ids.defined() && attention_mask.shape() == ids.shape(), "Bert",
             "expected attention_mask of the ids' shape ",
             ids.defined() ? shape_str(ids.shape()) : "undefined", ", got ",
             attention_mask.describe());
    mask = attention_mask.dtype() == DType::b8 ? attention_mask
                                               : ne(attention_mask, zeros_like(attention_mask));
  }
  // Sequence parallel: (B, T/P, C) shards through the blocks; the mask stays whole (B, T), as
  // attention's keys are the gathered sequence.
  Tensor x = embeddings_->forward(ids, token_type_ids);  // (B, T, C)
  for (size_t i = 0; i < h_->size(); ++i) x = h_->at<nn::Block>(i)->forward(x, mask);
  return seq_.gather(x, nn::kSequenceDim);  // (B, T, C) on every rank
}

Tensor Bert::mlm_logits(const Tensor& hidden) {
  TS_CHECK(mlm_ != nullptr, "Bert.mlm_logits", "expected a model built with mlm_head, got none");
  return mlm_->forward(hidden);
}

Tensor Bert::mlm_loss(const Tensor& hidden, const Tensor& labels) {
  TS_CHECK(labels.defined() && hidden.defined() && labels.dim() == 2 &&
               labels.size(0) == hidden.size(0) && labels.size(1) == hidden.size(1),
           "Bert.mlm_loss", "expected labels (B, T) matching the hidden states ",
           hidden.defined() ? hidden.describe() : "undefined", ", got ",
           labels.defined() ? labels.describe() : "undefined");
  TS_CHECK(mlm_ != nullptr, "Bert.mlm_loss", "expected a model built with mlm_head, got none");
  return mlm_->loss(hidden, as_i64(labels));
}

Tensor Bert::classify(const Tensor& hidden) {
  TS_CHECK(classifier_ != nullptr, "Bert.classify",
           "expected a model built with num_labels > 0, got num_labels 0");
  return classifier_->forward(pooler_->forward(hidden));  // (B, num_labels)
}

Tensor Bert::classification_loss(const Tensor& hidden, const Tensor& labels) {
  TS_CHECK(
      labels.defined() && labels.dim() == 1 && hidden.defined() && labels.size(0) == hidden.size(0),
      "Bert.classification_loss", "expected labels (B) for hidden states ",
      hidden.defined() ? hidden.describe() : "undefined", ", got ",
      labels.defined() ? labels.describe() : "undefined");
  return cross_entropy(classify(hidden), as_i64(labels));
}

}  // namespace tessera::bert

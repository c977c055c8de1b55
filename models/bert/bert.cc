// BERT encoder construction, forward and head losses (see bert.h).
#include "models/bert/bert.h"

#include "autograd/ops.h"

namespace tessera::bert {

namespace {

Tensor as_i64(const Tensor& t) { return t.dtype() == DType::i64 ? t : t.to(DType::i64); }

// attention_mask (B, T), bool or integer, as a bool mask (true = attend); undefined stays
// undefined. `want` is (B, T), with T -1 where it is not known.
Tensor key_mask(const Tensor& attention_mask, const Shape& want) {
  if (!attention_mask.defined()) return attention_mask;
  TS_CHECK(want.size() == 2 && attention_mask.dim() == 2 && attention_mask.size(0) == want[0] &&
               (want[1] < 0 || attention_mask.size(1) == want[1]),
           "Bert", "expected attention_mask of the ids' shape ",
           want.size() == 2 ? shape_str(want) : "(B, T)", ", got ", attention_mask.describe());
  return attention_mask.dtype() == DType::b8 ? attention_mask
                                             : ne(attention_mask, zeros_like(attention_mask));
}

}  // namespace

Bert::Bert(const BertConfig& config, const nn::BuildContext& ctx)
    : config_(config), seq_(ctx), split2d_(ctx), split3d_(ctx), sp_(ctx) {
  config.validate();
  const BertConfig& c = config_;
  // Parameter counts that balance the "parameters" partition (the embeddings on the first stage,
  // the heads on the last).
  const int64_t d = c.d_model, hidden = c.mlp_hidden > 0 ? c.mlp_hidden : 4 * d;
  const int64_t block_params = 4 * d * d + 2 * d * hidden + hidden + 9 * d;
  const int64_t heads = (c.mlm_head ? d * d + 3 * d + c.vocab_size : 0) +
                        (c.num_labels > 0 ? d * d + d + (d + 1) * c.num_labels : 0);
  stage_ =
      nn::PipelineStage::plan(ctx, c.n_layers, block_params,
                              (c.vocab_size + c.max_positions + c.type_vocab_size + 2) * d, heads);
  // Layers this rank does not hold are built aside and dropped, in the serial order, so the
  // generator draws every held weight at its serial offset. The MLM decoder is tied to the word
  // embeddings: `word` is kept until the head is built (or built aside), and the last stage holds
  // it under its serial name, as GPT's last stage holds wte.
  std::shared_ptr<nn::Embedding> word;
  if (stage_.holds_embeddings()) {
    embeddings_ = register_module("embeddings", std::make_shared<BertEmbeddings>(c, ctx));
    stage_.hold("embeddings", *embeddings_);
    word = embeddings_->word_embeddings();
  } else {
    auto aside = std::make_shared<BertEmbeddings>(c, ctx);
    stage_.skip("embeddings", [&] { return aside; });
    word = aside->word_embeddings();
    if (stage_.holds_head() && c.mlm_head) {
      auto holder = register_module("embeddings", std::make_shared<nn::Module>());
      holder->register_module("word_embeddings", word);
    }
  }
  h_ = register_module("h", std::make_shared<nn::ModuleList>());
  auto make_block = [&] {
    return nn::make_block({.d_model = c.d_model,
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
                          ctx);
  };
  block_slot_ = stage_.build_blocks("h", *h_, c.n_layers, make_block);
  if (c.mlm_head) {
    // The serial model lists the decoder's weight as embeddings.word_embeddings.weight.
    const std::vector<std::string> tied{"decoder.weight"};
    auto make_mlm = [&] { return std::make_shared<BertMLMHead>(c, *word, ctx); };
    if (stage_.holds_head()) {
      mlm_ = register_module("mlm", make_mlm());
      stage_.hold("mlm", *mlm_, tied);
    } else {
      stage_.skip("mlm", make_mlm, tied);
    }
  }
  if (c.num_labels > 0) {
    auto make_pooler = [&] { return std::make_shared<BertPooler>(c, ctx); };
    auto make_classifier = [&] {
      return nn::make_classification_head({.d_model = c.d_model,
                                           .num_classes = c.num_labels,
                                           .pooling = nn::Pooling::none,
                                           .dropout = c.dropout,
                                           .init_std = c.init_std},
                                          ctx);
    };
    if (stage_.holds_head()) {
      pooler_ = register_module("pooler", make_pooler());
      stage_.hold("pooler", *pooler_);
      classifier_ = register_module("classifier", make_classifier());
      stage_.hold("classifier", *classifier_);
    } else {
      stage_.skip("pooler", make_pooler);
      stage_.skip("classifier", make_classifier);
    }
  }
}

Tensor Bert::run_blocks(Tensor x, const Tensor& mask, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    nn::enter_dropout_unit(i + 1);
    x = h_->at<nn::Block>(size_t(block_slot_[i]))->forward(x, mask);
  }
  return x;
}

int64_t Bert::serial_batch(const Tensor& hidden) const {
  return split3d_.on() ? split3d_.batch(hidden) : split2d_.batch(hidden);
}

Tensor Bert::forward(const Tensor& ids, const Tensor& token_type_ids,
                     const Tensor& attention_mask) {
  TS_CHECK(!stage_.pipelined(), "Bert",
           "expected the whole model on this rank, got pipeline stage ", stage_.rank(), " of ",
           stage_.ranks(), " (use stage_forward)");
  // The mask is checked first, so that no rank enters a collective another has refused.
  const Tensor mask = key_mask(attention_mask, ids.defined() ? ids.shape() : Shape{});
  // Sequence parallel: (B, T/P, C) shards through the blocks; the mask stays whole (B, T), as
  // attention's keys are the gathered sequence.
  Tensor x = embeddings_->forward(ids, token_type_ids);  // (B, T, C)
  x = run_blocks(x, mask, 0, config_.n_layers);
  return seq_.gather(x, nn::kSequenceDim);  // (B, T, C) on every rank
}

Tensor Bert::stage_forward(int chunk, const Tensor& input, const Tensor& attention_mask,
                           const Tensor& labels, const Tensor& token_type_ids) {
  const bool first = stage_.first_chunk(chunk);
  TS_CHECK(input.defined() && input.dim() == (first ? 2 : 3), "Bert.stage_forward", "expected ",
           first ? "token ids (B, T)" : "hidden states (B, T, C)", ", got ",
           input.defined() ? input.describe() : "undefined");
  // Later stages know B, not T (a sequence-parallel shard holds T/P rows); the mask is whole.
  const Tensor mask = key_mask(attention_mask, first ? input.shape() : Shape{input.size(0), -1});
  const parallel::pipeline::BlockRange blocks = stage_.chunk_blocks(chunk);
  Tensor x = run_blocks(first ? embeddings_->forward(input, token_type_ids) : input, mask,
                        blocks.begin, blocks.end);
  if (!stage_.last_chunk(chunk)) return x;
  x = seq_.gather(x, nn::kSequenceDim);  // (B, T, C)
  return labels.defined() ? mlm_loss(x, labels) : mlm_logits(x);
}

Tensor Bert::mlm_logits(const Tensor& hidden) {
  TS_CHECK(mlm_ != nullptr, "Bert.mlm_logits", "expected a model built with mlm_head, got none");
  return mlm_->forward(hidden);
}

Tensor Bert::mlm_loss(const Tensor& hidden, const Tensor& labels) {
  // Under parallel.sequence the hidden states hold T/S of the labels' T positions.
  const int64_t parts = sp_.on() ? sp_.size() : 1;
  TS_CHECK(labels.defined() && hidden.defined() && labels.dim() == 2 && hidden.dim() == 3 &&
               labels.size(0) == serial_batch(hidden) && labels.size(1) == hidden.size(1) * parts,
           "Bert.mlm_loss", "expected labels (B, T) matching the hidden states ",
           hidden.defined() ? hidden.describe() : "undefined",
           parts > 1 ? " (this rank's T / parallel.sequence positions)" : "", ", got ",
           labels.defined() ? labels.describe() : "undefined");
  TS_CHECK(mlm_ != nullptr, "Bert.mlm_loss", "expected a model built with mlm_head, got none");
  if (!sp_.on()) return mlm_->loss(hidden, as_i64(labels));
  // The sum over this rank's labelled positions, scaled by the whole sequences' count.
  const Tensor local = sp_.take(as_i64(labels), 1);  // (B, T/S)
  const Tensor host = local.to(kCPU).contiguous();
  int64_t count = 0;
  for (int64_t i = 0; i < host.numel(); ++i) count += host.data<int64_t>()[i] != -100 ? 1 : 0;
  return sp_.mean_share(mlm_->loss(hidden, local, {.reduction = "sum"}), count);
}

Tensor Bert::classify(const Tensor& hidden) {
  TS_CHECK(classifier_ != nullptr, "Bert.classify",
           "expected a model built with num_labels > 0, got num_labels 0");
  return classifier_->forward(pooler_->forward(hidden));  // (B, num_labels)
}

Tensor Bert::classification_loss(const Tensor& hidden, const Tensor& labels) {
  TS_CHECK(labels.defined() && labels.dim() == 1 && hidden.defined() &&
               labels.size(0) == serial_batch(hidden),
           "Bert.classification_loss", "expected labels (B) for hidden states ",
           hidden.defined() ? hidden.describe() : "undefined", ", got ",
           labels.defined() ? labels.describe() : "undefined");
  return cross_entropy(classify(hidden), as_i64(labels));
}

}  // namespace tessera::bert

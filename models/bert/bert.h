// BERT encoder: embeddings, N post-LN bidirectional blocks with key-padding masks, a masked-LM head
// tied to the word embeddings and (when num_labels > 0) a pooler and sequence classifier. Written
// once, serially, through the models/nn factories. Parameter names: embeddings.*, h.N.* (ln_1 after
// attention, ln_2 after the MLP), mlm.*, pooler.dense.*, classifier.head.* (models/hf maps Hugging
// Face's names onto these).
#pragma once

#include <memory>

#include "core/generator.h"
#include "models/bert/bert_config.h"
#include "models/bert/bert_heads.h"
#include "models/nn/nn.h"

namespace tessera::bert {

class Bert : public nn::Module {
 public:
  // Weights as BERT initialises them: N(0, init_std) for embeddings and linears, zero biases, unit
  // LayerNorm gains.
  // Under a context with tensor parallelism the blocks, word embeddings and MLM decoder are their
  // 1D twins (factory.h).
  Bert(const BertConfig& config, const nn::BuildContext& ctx);
  std::string type_name() const override { return "Bert"; }

  // ids (B, T) i32/i64; token_type_ids (B, T) or undefined (type 0); attention_mask (B, T), bool or
  // integer, nonzero = a real token, or undefined (all real) -> hidden states (B, T, C).
  // Under sequence parallelism (parallel.tensor.sequence_parallel) the embeddings and blocks run on
  // sequence shards (B, T/P, C) (T must divide by P) and the result is gathered: every rank holds
  // the whole (B, T, C), which the heads below use replicated. The mask stays (B, T): attention
  // gathers its keys, so it masks the whole sequence.
  Tensor forward(const Tensor& ids, const Tensor& token_type_ids = Tensor(),
                 const Tensor& attention_mask = Tensor());

  // Masked-LM logits (B, T, vocab) from hidden states; needs config.mlm_head.
  Tensor mlm_logits(const Tensor& hidden);
  // Mean cross-entropy over the labelled positions of labels (B, T) (-100: not masked, ignored).
  Tensor mlm_loss(const Tensor& hidden, const Tensor& labels);
  // Sequence-classification logits (B, num_labels) from the pooled [CLS] token; needs
  // config.num_labels > 0.
  Tensor classify(const Tensor& hidden);
  // Mean cross-entropy of classify(hidden) against labels (B).
  Tensor classification_loss(const Tensor& hidden, const Tensor& labels);

  const BertConfig& config() const { return config_; }
  const std::shared_ptr<BertEmbeddings>& embeddings() const { return embeddings_; }
  const std::shared_ptr<nn::ModuleList>& blocks() const { return h_; }

 private:
  BertConfig config_;
  nn::SequenceSplit seq_;  // off unless parallel.tensor.sequence_parallel
  std::shared_ptr<BertEmbeddings> embeddings_;
  std::shared_ptr<nn::ModuleList> h_;
  std::shared_ptr<BertMLMHead> mlm_;
  std::shared_ptr<BertPooler> pooler_;
  std::shared_ptr<nn::ClassificationHead> classifier_;
};

}  // namespace tessera::bert

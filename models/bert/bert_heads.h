// BERT's parts around the encoder stack: the embeddings (word + position + token type, LayerNorm,
// dropout), the masked-LM head (dense, GELU, LayerNorm, decoder tied to the word embeddings plus a
// bias) and the pooler (tanh dense on the [CLS] token) that feeds sequence classification.
#pragma once

#include <memory>

#include "core/generator.h"
#include "models/bert/bert_config.h"
#include "models/nn/nn.h"
#include "models/nn/parallel/sequence_1d.h"
#include "models/nn/sequence_shard.h"

namespace tessera::bert {

class BertEmbeddings : public nn::Module {
 public:
  // Children: word_embeddings, position_embeddings, token_type_embeddings, layer_norm, dropout.
  BertEmbeddings(const BertConfig& config, const nn::BuildContext& ctx);
  std::string type_name() const override { return "BertEmbeddings"; }

  // ids (B, T), token_type_ids (B, T) or undefined (all type 0) -> (B, T, C). Under sequence
  // parallelism: this rank's shard (B, T/P, C) (T must divide by P), its LayerNorm and dropout on
  // the shard as in the blocks (models/nn/parallel/sequence_1d.h). Under the paper's sequence
  // parallelism (parallel.sequence > 1): this rank's positions (B, T/S, C), the position
  // embeddings at their global index, ids and token types cut to them (sequence_shard.h). Under
  // 2D tensor parallelism: this rank's block (B / q, T, C / q); under 3D its piece
  // (B / q, T, C / q^2).
  Tensor forward(const Tensor& ids, const Tensor& token_type_ids);

  const std::shared_ptr<nn::Embedding>& word_embeddings() const { return word_; }

 private:
  int64_t max_positions_;
  nn::SequenceSplit seq_;  // off unless parallel.tensor.sequence_parallel
  nn::SequenceShard sp_;   // off unless parallel.sequence > 1
  std::shared_ptr<nn::Embedding> word_, position_, token_type_;
  std::shared_ptr<nn::LayerNorm> layer_norm_;
  std::shared_ptr<nn::Dropout> dropout_;
};

class BertMLMHead : public nn::Module {
 public:
  // Children: dense (C -> C), layer_norm, decoder (an LMHead on `word_embeddings` with a bias).
  BertMLMHead(const BertConfig& config, const nn::Embedding& word_embeddings,
              const nn::BuildContext& ctx);
  std::string type_name() const override { return "BertMLMHead"; }

  // hidden (B, T, C) -> logits (B, T, vocab). Under sequence parallelism hidden is the whole
  // (gathered) sequence on every rank: the transform runs replicated and the decoder, which takes
  // a sequence shard and all-gathers it, gets this rank's chunk. Under 2D tensor parallelism
  // hidden is this rank's block (B / q, T, C / q) (3D: its piece (B / q, T, C / q^2)) and the
  // logits the whole batch's.
  Tensor forward(const Tensor& hidden);
  // cross_entropy(forward(hidden), labels, opts), through the decoder (vocab-parallel: no
  // gather).
  Tensor loss(const Tensor& hidden, const Tensor& labels, const CrossEntropyOptions& opts = {});

 private:
  Tensor transform(const Tensor& hidden);  // dense, GELU, LayerNorm; sequence parallel: its shard
  nn::SequenceSplit seq_;
  std::shared_ptr<nn::Linear> dense_;
  std::shared_ptr<nn::LayerNorm> layer_norm_;
  std::shared_ptr<nn::LMHead> decoder_;
};

class BertPooler : public nn::Module {
 public:
  // Child: dense (C -> C).
  BertPooler(const BertConfig& config, const nn::BuildContext& ctx);
  std::string type_name() const override { return "BertPooler"; }

  // hidden (B, T, C) -> tanh(dense(hidden[:, 0])) (B, C). Under parallel.sequence > 1 hidden is
  // this rank's shard (B, T/S, C) and the [CLS] row comes from rank 0, which holds it.
  Tensor forward(const Tensor& hidden);

 private:
  nn::SequenceShard sp_;
  std::shared_ptr<nn::Linear> dense_;
};

}  // namespace tessera::bert

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
#include "models/nn/parallel/split_2d.h"
#include "models/nn/parallel/split_3d.h"
#include "models/nn/pipeline_stage.h"
#include "models/nn/sequence_shard.h"

namespace tessera::bert {

class Bert : public nn::Module {
 public:
  // Weights as BERT initialises them: N(0, init_std) for embeddings and linears, zero biases, unit
  // LayerNorm gains.
  // Under a context with tensor parallelism the blocks, word embeddings and MLM decoder are their
  // 1D twins (factory.h). Under pipeline parallelism this rank builds only its stages' layers
  // (pipeline_stage.h), with the serial model's weights: the embeddings on global stage 0, the
  // heads on the last one, which also holds the word embeddings its MLM decoder is tied to.
  Bert(const BertConfig& config, const nn::BuildContext& ctx);
  std::string type_name() const override { return "Bert"; }

  // ids (B, T) i32/i64; token_type_ids (B, T) or undefined (type 0); attention_mask (B, T), bool or
  // integer, nonzero = a real token, or undefined (all real) -> hidden states (B, T, C).
  // Under sequence parallelism (parallel.tensor.sequence_parallel) the embeddings and blocks run on
  // sequence shards (B, T/P, C) (T must divide by P) and the result is gathered: every rank holds
  // the whole (B, T, C), which the heads below use replicated. The mask stays (B, T): attention
  // gathers its keys, so it masks the whole sequence. Under 2D tensor parallelism the result is
  // this rank's block (B / q, T, C / q), which the heads below take (their losses and logits are
  // the whole batch's); the mask stays (B, T). Under 3D tensor parallelism likewise with this
  // rank's piece (B / q, T, C / q^2) (parallel/tensor/cube_3d.h). Under the paper's sequence
  // parallelism
  // (parallel.sequence = S > 1) the result is this rank's positions (B, T/S, C) (rank r holds
  // [r T/S, (r + 1) T/S)), which the heads below take; the mask stays (B, T), the whole sequence's
  // keys, as sequence-parallel attention wants it. Refused under pipeline parallelism.
  Tensor forward(const Tensor& ids, const Tensor& token_type_ids = Tensor(),
                 const Tensor& attention_mask = Tensor());

  // Masked-LM logits (B, T, vocab) from hidden states; needs config.mlm_head. Under
  // parallel.sequence: this rank's positions' logits (B, T/S, vocab).
  Tensor mlm_logits(const Tensor& hidden);
  // Mean cross-entropy over the labelled positions of labels (B, T) (-100: not masked, ignored).
  // Under parallel.sequence labels are the whole (B, T) and the result is this rank's share of the
  // mean over every labelled position of the sequences (SequenceShard::mean_share: the ranks hold
  // different numbers of them), so the mean over the sequence ranks is the serial loss.
  Tensor mlm_loss(const Tensor& hidden, const Tensor& labels);
  // Sequence-classification logits (B, num_labels) from the pooled [CLS] token; needs
  // config.num_labels > 0.
  Tensor classify(const Tensor& hidden);
  // Mean cross-entropy of classify(hidden) against labels (B).
  Tensor classification_loss(const Tensor& hidden, const Tensor& labels);

  // Pipeline parallelism: local model chunk `chunk`'s part of mlm_loss(forward(...)). input: the
  // ids (B, T) on global stage 0, else the previous stage's hidden states (B, T, C) (sequence
  // parallel: this rank's shard). attention_mask is forward()'s, used by every stage's blocks (each
  // stage takes it from its own copy of the micro-batch); token_type_ids are read on stage 0 only.
  // Returns the hidden states, or on the last stage the MLM loss against labels (B, T) (undefined
  // labels: the logits (B, T, vocab)). Serially stage_forward(0, ids, mask, labels) is
  // mlm_loss(forward(ids, Tensor(), mask), labels).
  Tensor stage_forward(int chunk, const Tensor& input, const Tensor& attention_mask,
                       const Tensor& labels, const Tensor& token_type_ids = Tensor());
  const nn::PipelineStage& stage() const { return stage_; }

  const BertConfig& config() const { return config_; }
  // Under pipeline parallelism: null off global stage 0, and the held blocks only.
  const std::shared_ptr<BertEmbeddings>& embeddings() const { return embeddings_; }
  const std::shared_ptr<nn::ModuleList>& blocks() const { return h_; }
  // How the sequence is split over parallel.sequence (off: whole); labels (B, T) -> this rank's
  // positions with sequence_shard().take(labels, 1).
  const nn::SequenceShard& sequence_shard() const { return sp_; }

 private:
  BertConfig config_;
  nn::SequenceSplit seq_;  // off unless parallel.tensor.sequence_parallel
  nn::Split2D split2d_;    // off unless parallel.tensor.mode 2d
  nn::Split3D split3d_;    // off unless parallel.tensor.mode 3d
  nn::SequenceShard sp_;   // off unless parallel.sequence > 1 (the paper's sequence parallelism)
  std::shared_ptr<BertEmbeddings> embeddings_;
  std::shared_ptr<nn::ModuleList> h_;
  std::shared_ptr<BertMLMHead> mlm_;
  std::shared_ptr<BertPooler> pooler_;
  std::shared_ptr<nn::ClassificationHead> classifier_;
  nn::PipelineStage stage_;
  std::vector<int64_t> block_slot_;  // global block index -> position in h_ (-1: not held)

  Tensor run_blocks(Tensor x, const Tensor& mask, int64_t begin, int64_t end);
  // The serial batch B of hidden states (2D: a block's rows times q; 3D: a piece's).
  int64_t serial_batch(const Tensor& hidden) const;
};

}  // namespace tessera::bert

// The GPT, BERT and ViT batches of the serial-vs-twin model programs (tp_*_ranks,
// parallel/sequence/sequence_models_ranks), which every rank draws alike from one seed, BERT's
// loss and eval outputs, and GPT's eval checks (logits, a padded prompt, greedy generation).
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "models/bert/bert.h"
#include "models/gpt/gpt.h"
#include "models/vit/vit.h"

namespace tessera::parallel::testing {

// Token ids and next-token targets (B, T), the first 2 targets of each row ignored (-100).
struct GptBatch {
  Tensor ids, targets;
};
GptBatch gpt_batch(int64_t vocab, int64_t b, int64_t t);

// Ids, token types (undefined without them), a key-padding mask, masked-LM labels (the first 3
// positions of each row not masked) and one class per row.
struct BertBatch {
  Tensor ids, types, mask, labels, classes;
};
struct BertBatchSpec {
  int64_t b = 3, t = 16;
  bool token_types = false;
  int64_t pad_second = 10;  // row 1 is padding from this position on
  int64_t pad_last = 13;    // the last row likewise
};
BertBatch bert_batch(const bert::BertConfig& c, const BertBatchSpec& spec);
// The masked-LM plus the classification loss.
Tensor bert_loss(bert::Bert& m, const BertBatch& x);

// In eval mode, without gradients: the hidden states and both heads' logits.
struct BertOutputs {
  Tensor hidden, mlm_logits, class_logits;
};
BertOutputs bert_eval(bert::Bert& m, const BertBatch& x);

// Images (B, C, H, W) and one label per image.
struct VitBatch {
  Tensor images, labels;
};
VitBatch vit_batch(const vit::ViTConfig& c, int64_t b);

// The factories gave a GPT twin the layers of mode `dims` ("2D", "3D"): the vocab-parallel token
// embedding and LM head, the position embedding and the final LayerNorm.
void check_gpt_layers(gpt::GPT& twin, const std::string& dims, const std::string& what);

// In eval mode, the twin against the serial GPT: the logits of ids, of its first row's first
// `prompt` tokens alone (a batch of one, padded to split), and `new_tokens` greedy tokens from it.
void check_gpt_eval(gpt::GPT& serial, gpt::GPT& twin, const Tensor& ids, int64_t prompt,
                    int64_t new_tokens, const std::string& what);

}  // namespace tessera::parallel::testing

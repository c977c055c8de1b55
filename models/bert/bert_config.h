// BERT encoder configuration: a small struct with bert-base's defaults, the bert-tiny and
// bert-base presets, and strict JSON reading.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tessera::bert {

struct BertConfig {
  int64_t vocab_size = 30522;
  int64_t max_positions = 512;
  int64_t type_vocab_size = 2;
  int64_t n_layers = 12;
  int64_t n_heads = 12;
  int64_t d_model = 768;
  int64_t mlp_hidden = 3072;  // 0: 4 * d_model
  double dropout = 0.1;       // embeddings, residual projections, classifier input
  double attn_dropout = 0.1;  // attention probabilities
  double ln_eps = 1e-12;
  double init_std = 0.02;
  bool mlm_head = true;    // the masked-LM head (dense, GELU, LayerNorm, tied decoder + bias)
  int64_t num_labels = 0;  // > 0: a pooler and a sequence-classification head with this many labels
  bool checkpoint = false;  // activation checkpointing, block by block

  // Throws ValueError naming the field when a value is out of range.
  void validate() const;
  // Keys: the field names above, plus "preset" (bert-tiny, bert-base) whose values the other keys
  // override. Unknown keys and wrongly typed values throw naming the key.
  static BertConfig from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;
};

// "bert-tiny" (Google's BERT-Tiny: 2 layers, 2 heads, width 128), "bert-base".
std::vector<std::string> bert_preset_names();
BertConfig bert_preset(const std::string& name);

}  // namespace tessera::bert

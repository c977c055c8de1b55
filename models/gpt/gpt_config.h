// GPT-2 style decoder configuration: a small struct with GPT-2 124M's defaults, named presets
// (tiny ones for 2 CPU cores, GPT-2 and GPT-3 shapes for GPUs) and strict JSON reading.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tessera::gpt {

struct GPTConfig {
  int64_t vocab_size = 50257;
  int64_t context_length = 1024;  // learned positions (GPT-2's n_positions)
  int64_t n_layers = 12;
  int64_t n_heads = 12;
  int64_t d_model = 768;
  int64_t mlp_hidden = 0;     // 0: 4 * d_model
  double dropout = 0.0;       // on the embeddings and after each residual projection
  double attn_dropout = 0.0;  // on the attention probabilities
  double ln_eps = 1e-5;
  bool bias = true;
  double init_std = 0.02;
  bool tie_embeddings = true;  // the LM head reuses the token embedding
  bool checkpoint = false;     // activation checkpointing, block by block

  // Throws ValueError naming the field when a value is out of range.
  void validate() const;
  // Keys: the field names above, plus "preset" (a name from gpt_preset_names()) whose values the
  // other keys then override. Unknown keys and wrongly typed values throw naming the key.
  static GPTConfig from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;
};

// "gpt-tiny", "gpt-mini", "gpt2-124m", "gpt2-350m", "gpt2-1.3b", "gpt3-2.7b".
std::vector<std::string> gpt_preset_names();
// Throws ValueError listing the names when `name` is unknown.
GPTConfig gpt_preset(const std::string& name);

// Parameters of a GPT built from `config`, counted once each (a tied head adds nothing), without
// building it.
int64_t gpt_num_parameters(const GPTConfig& config);

}  // namespace tessera::gpt

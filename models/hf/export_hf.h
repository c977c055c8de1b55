// Writing Tessera models as Hugging Face model directories: model.safetensors in the Hugging Face
// layout (hf_names.h) and the config.json transformers reads, so a model trained here loads with
// GPT2LMHeadModel.from_pretrained(dir).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "models/gpt/gpt_config.h"
#include "models/hf/hf_names.h"

namespace tessera::hf {

// GPT2Config's fields for `config` (model_type gpt2, GPT2LMHeadModel, tanh GELU as GPT-2's).
nlohmann::json gpt2_hf_config(const gpt::GPTConfig& config);
// The reverse, to build a GPT for a Hugging Face GPT-2 directory's weights: its config.json's
// model_type must be gpt2 (absent fields take GPT2Config's defaults). Throws ValueError naming
// `where` for another model type or an activation other than GPT-2's tanh GELU.
gpt::GPTConfig gpt_config_from_hf(const nlohmann::json& hf, const std::string& where);

// Writes `dir`/model.safetensors (to_hf_gpt2 of `state`, a GPT's state_dict()) and
// `dir`/config.json, into a fresh directory that appears whole or not at all. Throws ValueError
// for an existing `dir` and for a GPT that GPT-2 cannot express (model.bias false: GPT-2 has biases
// everywhere). An untied head is written as lm_head.weight with tie_word_embeddings false.
void export_hf_gpt2(const NamedTensors& state, const gpt::GPTConfig& config,
                    const std::string& dir);

}  // namespace tessera::hf

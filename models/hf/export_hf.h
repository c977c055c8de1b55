// Writing Tessera models as Hugging Face model directories: model.safetensors in the Hugging Face
// layout (hf_names.h) and the config.json transformers reads, so a model trained here loads with
// GPT2LMHeadModel / BertForMaskedLM / ViTForImageClassification .from_pretrained(dir); and the
// reverse config readers, to build our model for a Hugging Face directory's weights.
//
// What the format cannot express, refused with ValueError: a GPT without biases (GPT-2 has them
// everywhere); a config.json of another model_type, or one whose activation is not ours (GPT-2's
// tanh GELU; BERT's and ViT's exact GELU), BERT position embeddings other than absolute, a BERT
// decoder (is_decoder) and a ViT without query / key / value biases. Every BertConfig and ViTConfig
// is expressible. Hugging Face has no BERT class with both an MLM head and a classifier: such a
// model is written with both heads and both architectures; each class loads its own head and
// reports the other's tensors as unused. Training-only settings (activation checkpointing) are
// not written.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "models/bert/bert_config.h"
#include "models/gpt/gpt_config.h"
#include "models/hf/hf_names.h"
#include "models/vit/vit_config.h"

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

// BertConfig's fields (model_type bert, exact GELU). architectures: BertForMaskedLM (mlm_head),
// BertForSequenceClassification (num_labels > 0, with id2label / label2id), both, or BertModel.
nlohmann::json bert_hf_config(const bert::BertConfig& config);
// The reverse: model_type must be bert. mlm_head and num_labels follow the architectures listed
// (BertForMaskedLM / BertForPreTraining: the MLM head; BertForSequenceClassification: as many
// labels as id2label names, 2 by default); absent fields take BertConfig's (Hugging Face's)
// defaults. Throws ValueError naming `where` for what the header lists.
bert::BertConfig bert_config_from_hf(const nlohmann::json& hf, const std::string& where);
// As export_hf_gpt2, for a Bert's state_dict() (to_hf_bert).
void export_hf_bert(const NamedTensors& state, const bert::BertConfig& config,
                    const std::string& dir);

// ViTConfig's fields (model_type vit, ViTForImageClassification, id2label for num_classes).
nlohmann::json vit_hf_config(const vit::ViTConfig& config);
// The reverse: model_type must be vit; num_classes is id2label's size (2, Hugging Face's default,
// when absent). Throws ValueError naming `where` for what the header lists.
vit::ViTConfig vit_config_from_hf(const nlohmann::json& hf, const std::string& where);
// As export_hf_gpt2, for a ViT's state_dict() (to_hf_vit).
void export_hf_vit(const NamedTensors& state, const vit::ViTConfig& config, const std::string& dir);

}  // namespace tessera::hf

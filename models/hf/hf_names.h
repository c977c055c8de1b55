// Hugging Face -> Tessera parameter mapping for GPT-2, BERT and ViT: pure functions over name ->
// tensor lists, so they can be tested without files. README.md in this folder lists every name.
// Each returns the entries our models' state_dict() uses (tied weights under each of their names),
// in the order met; Hugging Face buffers (GPT-2's attn.bias masks, BERT's position_ids) and heads
// we do not model (BERT's next-sentence head, ViTModel's pooler) are dropped; any other unknown
// name throws ValueError naming it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "models/vit/vit_config.h"

namespace tessera::hf {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// GPT2Model / GPT2LMHeadModel tensors, with or without the "transformer." prefix. Conv1D weights
// (in, out) become Linear weights (out, in). lm_head.weight comes from the file when present, else
// from wte.weight (the head is tied).
NamedTensors from_hf_gpt2(const NamedTensors& hf);
// The reverse, for export: our GPT's state_dict() in GPT2LMHeadModel's layout ("transformer."
// names, Conv1D weights (in, out)); a tied lm_head.weight is left out, as Hugging Face's files do.
NamedTensors to_hf_gpt2(const NamedTensors& ours);

// BertModel / BertForMaskedLM / BertForPreTraining / BertForSequenceClassification tensors, with or
// without the "bert." prefix; old LayerNorm.gamma / beta names accepted. query, key and value are
// fused into one c_attn (q | k | v, along the output features). The MLM decoder weight is the word
// embedding (tied) whenever the file has an MLM head.
NamedTensors from_hf_bert(const NamedTensors& hf);
// The reverse, for export: our Bert's state_dict() in Hugging Face's layout (separate query, key
// and value). With a head (MLM or classifier) the encoder is named under "bert." as
// BertForMaskedLM / BertForSequenceClassification save it, without one as BertModel does; the MLM
// decoder weight is left out when it equals the word embeddings (tied), as Hugging Face's files do,
// and its bias is written as cls.predictions.bias.
NamedTensors to_hf_bert(const NamedTensors& ours);

// ViTModel / ViTForImageClassification tensors, with or without the "vit." prefix. The Conv2d patch
// projection (D, C, P, P) becomes (D, C * P * P); query, key and value are fused as for BERT.
NamedTensors from_hf_vit(const NamedTensors& hf);
// The reverse, for export: our ViT's state_dict() as ViTForImageClassification saves it ("vit."
// encoder, top-level classifier); `config` gives the channels and patch size that turn the patch
// projection back into a Conv2d weight (D, C, P, P).
NamedTensors to_hf_vit(const NamedTensors& ours, const vit::ViTConfig& config);

}  // namespace tessera::hf

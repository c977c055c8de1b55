// Loading Hugging Face model.safetensors files into Tessera's GPT, BERT and ViT: read with
// io::SafetensorsFile, rename with hf_names.h, convert to each parameter's dtype, load in place.
#pragma once

#include <string>
#include <vector>

#include "models/bert/bert.h"
#include "models/gpt/gpt.h"
#include "models/hf/hf_names.h"
#include "models/nn/module.h"
#include "models/vit/vit.h"

namespace tessera::hf {

struct HFLoadOptions {
  // false: leave the task heads (BERT: mlm, pooler, classifier; ViT: head.head, the classifier) at
  // their initial values, e.g. to fine-tune on another label set.
  bool load_heads = true;
};

// Every GPT tensor must be in the file (GPT-2 files always hold them all); nothing is left over.
nn::LoadResult load_hf_gpt2(gpt::GPT& model, const std::string& path);
// The encoder (embeddings, blocks) must be complete. Heads the file lacks stay as initialised and
// are reported in missing_keys (with load_heads false, BERT's tied decoder weight is listed too,
// though it shares the loaded word embeddings); heads the file has and the model does not are
// reported in unexpected_keys. Anything else missing or unexpected throws ValueError naming the
// file and the key.
nn::LoadResult load_hf_bert(bert::Bert& model, const std::string& path,
                            const HFLoadOptions& options = {});
// As load_hf_bert; the heads are the classifier (head.head.*); the final norm is always loaded.
nn::LoadResult load_hf_vit(vit::ViT& model, const std::string& path,
                           const HFLoadOptions& options = {});

// The step after renaming, shared by the loaders (and usable on tensors already in memory): names
// starting with one of head_prefixes are optional as described above; `source` names the origin in
// errors.
nn::LoadResult load_mapped(nn::Module& model, const NamedTensors& mapped,
                           const std::vector<std::string>& head_prefixes, bool load_heads,
                           const std::string& source);

}  // namespace tessera::hf

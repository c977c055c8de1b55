// Starting weights from a Hugging Face directory (see init_from.h).
#include "models/train/init_from.h"

#include <map>

#include "core/error.h"
#include "core/shape.h"
#include "models/hf/export_hf.h"
#include "models/hf/hf_names.h"
#include "models/io/atomic_file.h"

namespace tessera::train {

namespace {

// The heads a model may lack in the file (and the file in the model): fine-tuning swaps them.
std::vector<std::string> head_prefixes(ModelKind kind) {
  if (kind == ModelKind::bert) return {"mlm.", "pooler.", "classifier."};
  if (kind == ModelKind::vit) return {"head.head."};
  return {};
}

bool has_prefix(const std::string& name, const std::vector<std::string>& prefixes) {
  for (const std::string& p : prefixes)
    if (name.compare(0, p.size(), p) == 0) return true;
  return false;
}

// The heads config's model is built without.
std::vector<std::string> absent_heads(const TrainConfig& c) {
  std::vector<std::string> out;
  if (c.kind != ModelKind::bert) return out;  // GPT has no optional head; ViT always classifies
  if (!c.bert.mlm_head) out.push_back("mlm.");
  if (c.bert.num_labels == 0) out.insert(out.end(), {"pooler.", "classifier."});
  return out;
}

// config.json's model type and head count against model.type's.
void check_hf_config(const TrainConfig& c, const std::string& dir) {
  const std::string path = dir + "/config.json";
  const nlohmann::json hf = nlohmann::json::parse(io::read_file(path, "init_from"), nullptr, false);
  TS_CHECK(!hf.is_discarded(), "init_from", path, ": expected JSON, got text that does not parse");
  int64_t heads = 0, want = 0;
  switch (c.kind) {
    case ModelKind::gpt:
      heads = hf::gpt_config_from_hf(hf, path).n_heads, want = c.gpt.n_heads;
      break;
    case ModelKind::bert:
      heads = hf::bert_config_from_hf(hf, path).n_heads, want = c.bert.n_heads;
      break;
    case ModelKind::vit:
      heads = hf::vit_config_from_hf(hf, path).n_heads, want = c.vit.n_heads;
      break;
    default:
      TS_FAIL("init_from", dir, ": expected model.type gpt, bert or vit, got ",
              model_kind_name(c.kind));
  }
  TS_CHECK(heads == want, "init_from", path, ": the Hugging Face model has ", heads,
           " attention heads, model.n_heads is ", want);
}

}  // namespace

io::NamedTensors hf_init_tensors(const TrainConfig& config, const std::string& dir) {
  try {
    check_hf_config(config, dir);
    const io::NamedTensors hf = io::SafetensorsFile::open(dir + "/model.safetensors").load_all();
    io::NamedTensors ours = config.kind == ModelKind::gpt    ? hf::from_hf_gpt2(hf)
                            : config.kind == ModelKind::bert ? hf::from_hf_bert(hf)
                                                             : hf::from_hf_vit(hf);
    const std::vector<std::string> absent = absent_heads(config);
    io::NamedTensors out;
    for (auto& entry : ours)
      if (!has_prefix(entry.first, absent)) out.push_back(std::move(entry));
    return out;
  } catch (const Error& e) {
    TS_FAIL("init_from", "model.init_from ", dir, " (model.type ", model_kind_name(config.kind),
            "): ", error_text(e));
  }
}

io::NamedTensors init_tensors_for_rank(const io::NamedTensors& serial, const nn::Module& model,
                                       ModelKind kind, const Placements& placements,
                                       const std::string& dir) {
  const std::vector<std::string> heads = head_prefixes(kind);
  const nn::StateDict own = model.state_dict();
  std::map<std::string, Tensor> current(own.begin(), own.end());
  io::NamedTensors present;
  std::map<const Storage*, std::string> loaded_storage;  // model storage -> the name loading it
  for (const auto& [name, t] : serial) {
    auto it = current.find(name);
    TS_CHECK(it != current.end(), "init_from", dir, ": tensor '", name,
             "' of the Hugging Face weights has no place in this ", model.type_name(),
             " (its model section differs from config.json's)");
    auto p = placements.find(name);
    const Shape& want = p != placements.end() ? p->second.global_shape : it->second.shape();
    TS_CHECK(t.shape() == want, "init_from", dir, ": tensor '", name, "' has shape ",
             shape_str(t.shape()), " in the Hugging Face weights, this model expects ",
             shape_str(want), " (its model section differs from config.json's)");
    present.emplace_back(name, t);
    loaded_storage.emplace(it->second.storage().get(), name);
  }
  io::NamedTensors local = cut_named(present, placements);
  std::map<std::string, Tensor> local_by_name(local.begin(), local.end());
  for (const auto& [name, t] : own) {
    if (local_by_name.count(name)) continue;
    TS_CHECK(has_prefix(name, heads), "init_from", dir, ": expected tensor '", name, "' of ",
             model.type_name(), " in the Hugging Face weights, got none (", serial.size(),
             " tensors after renaming)");
    // A head the file lacks keeps its initial values, unless it is tied to a loaded tensor (BERT's
    // decoder and word embeddings): then it must take the loaded value, not overwrite it.
    auto twin = loaded_storage.find(t.storage().get());
    local.emplace_back(name, twin != loaded_storage.end() ? local_by_name.at(twin->second) : t);
  }
  return local;
}

}  // namespace tessera::train

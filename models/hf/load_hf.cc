// Hugging Face safetensors loaders (see load_hf.h).
#include "models/hf/load_hf.h"

#include <map>

#include "models/io/safetensors.h"

namespace tessera::hf {

namespace {

bool is_head(const std::string& name, const std::vector<std::string>& prefixes) {
  for (const std::string& p : prefixes)
    if (name.compare(0, p.size(), p) == 0) return true;
  return false;
}

NamedTensors read_file(const std::string& path) {
  return io::SafetensorsFile::open(path).load_all();
}

}  // namespace

nn::LoadResult load_mapped(nn::Module& model, const NamedTensors& mapped,
                           const std::vector<std::string>& head_prefixes, bool load_heads,
                           const std::string& source) {
  const char* op = "load_hf";
  std::map<std::string, Tensor> own;
  for (const auto& [name, t] : model.state_dict()) own.emplace(name, t);
  nn::LoadResult result;
  nn::StateDict entries;
  std::map<std::string, bool> seen;
  for (const auto& [name, t] : mapped) {
    const bool head = is_head(name, head_prefixes);
    auto it = own.find(name);
    if (it == own.end()) {
      TS_CHECK(head, op, source, ": expected tensors of ", model.type_name(), ", got '", name,
               "', which it has no parameter for");
      result.unexpected_keys.push_back(name);
      continue;
    }
    if (head && !load_heads) continue;
    seen[name] = true;
    // Files often hold f16 / bf16 weights; the model keeps its own dtype.
    entries.emplace_back(name, t.dtype() == it->second.dtype() ? t : t.to(it->second.dtype()));
  }
  for (const auto& [name, t] : own) {
    if (seen.count(name)) continue;
    TS_CHECK(is_head(name, head_prefixes), op, source, ": expected tensor '", name, "' of ",
             model.type_name(), ", got none (", mapped.size(), " tensors after renaming)");
    result.missing_keys.push_back(name);
  }
  try {
    model.load_state_dict(entries, /*strict=*/false);
  } catch (const ValueError& e) {
    throw ValueError(op, source + ": " + e.what());
  }
  return result;
}

nn::LoadResult load_hf_gpt2(gpt::GPT& model, const std::string& path) {
  return load_mapped(model, from_hf_gpt2(read_file(path)), {}, true, path);
}

nn::LoadResult load_hf_bert(bert::Bert& model, const std::string& path,
                            const HFLoadOptions& options) {
  return load_mapped(model, from_hf_bert(read_file(path)), {"mlm.", "pooler.", "classifier."},
                     options.load_heads, path);
}

nn::LoadResult load_hf_vit(vit::ViT& model, const std::string& path, const HFLoadOptions& options) {
  return load_mapped(model, from_hf_vit(read_file(path)), {"head.head."}, options.load_heads, path);
}

}  // namespace tessera::hf

// Hugging Face BERT <-> Tessera Bert names (see hf_names.h and README.md).
#include <cstring>
#include <map>

#include "autograd/ops.h"
#include "models/hf/hf_common.h"

namespace tessera::hf {

using detail::split_layer;
using detail::strip_prefix;

namespace {

// TensorFlow-converted checkpoints call LayerNorm parameters gamma and beta.
std::string modern_leaf(std::string name) {
  for (const auto& [old_leaf, leaf] :
       {std::pair<std::string, std::string>{".gamma", ".weight"}, {".beta", ".bias"}}) {
    if (name.size() > old_leaf.size() &&
        name.compare(name.size() - old_leaf.size(), old_leaf.size(), old_leaf) == 0 &&
        name.find("LayerNorm") != std::string::npos)
      return name.substr(0, name.size() - old_leaf.size()) + leaf;
  }
  return name;
}

// Renames of whole prefixes: Hugging Face's (without "bert.") -> ours.
const std::vector<std::pair<std::string, std::string>>& prefix_map() {
  static const std::vector<std::pair<std::string, std::string>> m = {
      {"embeddings.word_embeddings.", "embeddings.word_embeddings."},
      {"embeddings.position_embeddings.", "embeddings.position_embeddings."},
      {"embeddings.token_type_embeddings.", "embeddings.token_type_embeddings."},
      {"embeddings.LayerNorm.", "embeddings.layer_norm."},
      {"pooler.dense.", "pooler.dense."},
      {"cls.predictions.transform.dense.", "mlm.dense."},
      {"cls.predictions.transform.LayerNorm.", "mlm.layer_norm."},
      {"classifier.", "classifier.head."},
  };
  return m;
}

// Per-layer renames: encoder.layer.N.<hf> -> h.N.<ours>.
const std::map<std::string, std::string>& layer_map() {
  static const std::map<std::string, std::string> m = {
      {"attention.output.dense.", "attn.c_proj."},
      {"attention.output.LayerNorm.", "ln_1."},
      {"intermediate.dense.", "mlp.c_fc."},
      {"output.dense.", "mlp.c_proj."},
      {"output.LayerNorm.", "ln_2."},
  };
  return m;
}

// A tied decoder read back from a checkpoint is a second tensor holding the embeddings' bytes.
bool same_values(const Tensor& a, const Tensor& b) {
  if (a.is_same(b)) return true;
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor x = a.to(kCPU).contiguous(), y = b.to(kCPU).contiguous();
  return std::memcmp(x.data_ptr(), y.data_ptr(), size_t(x.numel()) * dtype_size(x.dtype())) == 0;
}

}  // namespace

NamedTensors to_hf_bert(const NamedTensors& ours) {
  const char* op = "to_hf_bert";
  bool has_head = false;
  for (const auto& [name, t] : ours)
    has_head |= name.rfind("mlm.", 0) == 0 || name.rfind("classifier.", 0) == 0;
  // BertModel's own files carry no prefix; the task models (with a head) nest it under "bert.".
  const std::string base = has_head ? "bert." : "";
  NamedTensors out;
  Tensor word, decoder_weight;
  for (const auto& [name, t] : ours) {
    if (name == "embeddings.word_embeddings.weight") word = t.detach();
    if (name == "mlm.decoder.weight") {
      decoder_weight = t.detach();
      continue;
    }
    if (name == "mlm.decoder.bias") {
      out.emplace_back("cls.predictions.bias", t.detach());
      continue;
    }
    bool mapped = false;
    for (const auto& [hf_prefix, prefix] : prefix_map()) {
      std::string rest = name;
      if (!strip_prefix(rest, prefix)) continue;
      // Only the bare encoder's parts sit under "bert."; the heads keep their top-level names.
      const bool encoder = prefix.rfind("embeddings.", 0) == 0 || prefix == "pooler.dense.";
      out.emplace_back((encoder ? base : "") + hf_prefix + rest, t.detach());
      mapped = true;
      break;
    }
    if (mapped) continue;
    auto layer = split_layer(name, "h.");
    TS_CHECK(layer.has_value(), op, "expected a Tessera Bert tensor name, got '", name, "'");
    const auto& [n, rest] = *layer;
    const std::string hf_layer = base + "encoder.layer." + std::to_string(n) + ".";
    std::string leaf = rest;
    if (strip_prefix(leaf, "attn.c_attn.")) {
      const std::vector<Tensor> qkv = detail::split_qkv(t, op, name);
      const char* parts[] = {"query", "key", "value"};
      for (int i = 0; i < 3; ++i)
        out.emplace_back(hf_layer + "attention.self." + parts[i] + "." + leaf, qkv[size_t(i)]);
      continue;
    }
    for (const auto& [hf_sub, sub] : layer_map()) {
      leaf = rest;
      if (!strip_prefix(leaf, sub)) continue;
      out.emplace_back(hf_layer + hf_sub + leaf, t.detach());
      mapped = true;
      break;
    }
    TS_CHECK(mapped, op, "expected a Tessera Bert tensor name, got '", name, "'");
  }
  // Hugging Face ties the decoder to the word embeddings and leaves it out of its files.
  if (decoder_weight.defined() && !(word.defined() && same_values(decoder_weight, word)))
    out.emplace_back("cls.predictions.decoder.weight", decoder_weight);
  return out;
}

NamedTensors from_hf_bert(const NamedTensors& hf) {
  const char* op = "from_hf_bert";
  NamedTensors out;
  detail::QkvFuser qkv(op);
  Tensor word, decoder_weight, decoder_bias;
  bool has_mlm = false;
  for (const auto& [hf_name, t] : hf) {
    std::string name = modern_leaf(hf_name);
    strip_prefix(name, "bert.");
    if (name == "embeddings.position_ids" || strip_prefix(name, "cls.seq_relationship.")) continue;
    if (name == "cls.predictions.decoder.weight") {
      decoder_weight = t.detach();
      has_mlm = true;
      continue;
    }
    if (name == "cls.predictions.bias" || name == "cls.predictions.decoder.bias") {
      decoder_bias = t.detach();  // one tensor under two names in recent files
      has_mlm = true;
      continue;
    }
    if (name == "embeddings.word_embeddings.weight") word = t.detach();
    bool mapped = false;
    for (const auto& [from, to] : prefix_map()) {
      std::string rest = name;
      if (!strip_prefix(rest, from)) continue;
      out.emplace_back(to + rest, t.detach());
      has_mlm |= to.rfind("mlm.", 0) == 0;
      mapped = true;
      break;
    }
    if (mapped) continue;
    auto layer = split_layer(name, "encoder.layer.");
    TS_CHECK(layer.has_value(), op, "expected a Hugging Face BERT tensor name, got '", hf_name,
             "'");
    const auto& [n, rest] = *layer;
    std::string sub = rest;
    if (strip_prefix(sub, "attention.self.")) {
      const size_t dot = sub.find('.');
      const std::string part = sub.substr(0, dot);
      TS_CHECK(dot != std::string::npos && (part == "query" || part == "key" || part == "value"),
               op, "expected attention.self.{query, key, value}, got '", hf_name, "'");
      qkv.add(n, part, sub.substr(dot + 1), t);
      continue;
    }
    for (const auto& [from, to] : layer_map()) {
      sub = rest;
      if (!strip_prefix(sub, from)) continue;
      out.emplace_back("h." + std::to_string(n) + "." + to + sub, t.detach());
      mapped = true;
      break;
    }
    TS_CHECK(mapped, op, "expected a Hugging Face BERT tensor name, got '", hf_name, "'");
  }
  for (auto& entry : qkv.finish()) out.push_back(std::move(entry));
  if (has_mlm) {
    TS_CHECK(word.defined() || decoder_weight.defined(), op,
             "expected the word embeddings or cls.predictions.decoder.weight for the MLM head, got "
             "neither");
    out.emplace_back("mlm.decoder.weight", decoder_weight.defined() ? decoder_weight : word);
    TS_CHECK(decoder_bias.defined(), op,
             "expected cls.predictions.bias (the MLM decoder bias) beside the MLM head, got none");
    out.emplace_back("mlm.decoder.bias", decoder_bias);
  }
  return out;
}

}  // namespace tessera::hf

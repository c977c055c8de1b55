// Hugging Face BERT -> Tessera Bert names (see hf_names.h and README.md).
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

}  // namespace

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

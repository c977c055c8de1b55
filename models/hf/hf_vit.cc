// Hugging Face ViT <-> Tessera ViT names (see hf_names.h and README.md).
#include <map>

#include "autograd/ops.h"
#include "models/hf/hf_common.h"

namespace tessera::hf {

using detail::split_layer;
using detail::strip_prefix;

namespace {

// Per-layer renames: encoder.layer.N.<hf> -> h.N.<ours>.
const std::map<std::string, std::string>& layer_map() {
  static const std::map<std::string, std::string> m = {
      {"layernorm_before.", "ln_1."},   {"attention.output.dense.", "attn.c_proj."},
      {"layernorm_after.", "ln_2."},    {"intermediate.dense.", "mlp.c_fc."},
      {"output.dense.", "mlp.c_proj."},
  };
  return m;
}

}  // namespace

NamedTensors from_hf_vit(const NamedTensors& hf) {
  const char* op = "from_hf_vit";
  NamedTensors out;
  detail::QkvFuser qkv(op);
  for (const auto& [hf_name, t] : hf) {
    std::string name = hf_name;
    strip_prefix(name, "vit.");
    std::string rest = name;
    if (strip_prefix(rest, "pooler.")) continue;  // ViTModel's tanh pooler: not used by ViT
    if (name == "embeddings.cls_token") {
      out.emplace_back("cls_token", t.detach());
    } else if (name == "embeddings.position_embeddings") {
      out.emplace_back("pos_embed", t.detach());
    } else if (name == "embeddings.patch_embeddings.projection.weight") {
      TS_CHECK(t.dim() == 4, op, "expected a Conv2d weight (D, C, P, P) for '", hf_name, "', got ",
               t.describe());
      // (D, C, P, P) -> (D, C * P * P): the PatchEmbedding layout (models/nn/patch_embedding.h).
      out.emplace_back(
          "patch_embed.proj.weight",
          t.detach().contiguous().reshape({t.size(0), t.size(1) * t.size(2) * t.size(3)}));
    } else if (name == "embeddings.patch_embeddings.projection.bias") {
      out.emplace_back("patch_embed.proj.bias", t.detach());
    } else if (strip_prefix(rest = name, "layernorm.")) {
      out.emplace_back("head.norm." + rest, t.detach());
    } else if (strip_prefix(rest = name, "classifier.")) {
      out.emplace_back("head.head." + rest, t.detach());
    } else {
      auto layer = split_layer(name, "encoder.layer.");
      TS_CHECK(layer.has_value(), op, "expected a Hugging Face ViT tensor name, got '", hf_name,
               "'");
      const auto& [n, lrest] = *layer;
      std::string sub = lrest;
      if (strip_prefix(sub, "attention.attention.")) {
        const size_t dot = sub.find('.');
        const std::string part = sub.substr(0, dot);
        TS_CHECK(dot != std::string::npos && (part == "query" || part == "key" || part == "value"),
                 op, "expected attention.attention.{query, key, value}, got '", hf_name, "'");
        qkv.add(n, part, sub.substr(dot + 1), t);
        continue;
      }
      bool mapped = false;
      for (const auto& [from, to] : layer_map()) {
        sub = lrest;
        if (!strip_prefix(sub, from)) continue;
        out.emplace_back("h." + std::to_string(n) + "." + to + sub, t.detach());
        mapped = true;
        break;
      }
      TS_CHECK(mapped, op, "expected a Hugging Face ViT tensor name, got '", hf_name, "'");
    }
  }
  for (auto& entry : qkv.finish()) out.push_back(std::move(entry));
  return out;
}

NamedTensors to_hf_vit(const NamedTensors& ours, const vit::ViTConfig& config) {
  const char* op = "to_hf_vit";
  // ViTForImageClassification: the encoder under "vit.", the classifier beside it (our ViT always
  // has one: num_classes > 0).
  const std::string base = "vit.";
  NamedTensors out;
  for (const auto& [name, t] : ours) {
    std::string rest = name;
    if (name == "cls_token") {
      out.emplace_back(base + "embeddings.cls_token", t.detach());
    } else if (name == "pos_embed") {
      out.emplace_back(base + "embeddings.position_embeddings", t.detach());
    } else if (name == "patch_embed.proj.weight") {
      const int64_t c = config.in_channels, p = config.patch_size;
      TS_CHECK(t.dim() == 2 && t.size(1) == c * p * p, op, "expected '", name, "' of shape (D, ",
               c * p * p, ") for ", c, " channels and patch ", p, ", got ", t.describe());
      // (D, C * P * P) -> Conv2d (D, C, P, P): the flattening from_hf_vit undoes.
      out.emplace_back(base + "embeddings.patch_embeddings.projection.weight",
                       t.detach().contiguous().reshape({t.size(0), c, p, p}));
    } else if (name == "patch_embed.proj.bias") {
      out.emplace_back(base + "embeddings.patch_embeddings.projection.bias", t.detach());
    } else if (strip_prefix(rest, "head.norm.")) {
      out.emplace_back(base + "layernorm." + rest, t.detach());
    } else if (strip_prefix(rest = name, "head.head.")) {
      out.emplace_back("classifier." + rest, t.detach());
    } else {
      auto layer = split_layer(name, "h.");
      TS_CHECK(layer.has_value(), op, "expected a Tessera ViT tensor name, got '", name, "'");
      const auto& [n, lrest] = *layer;
      const std::string hf_layer = base + "encoder.layer." + std::to_string(n) + ".";
      std::string leaf = lrest;
      if (strip_prefix(leaf, "attn.c_attn.")) {
        const std::vector<Tensor> qkv = detail::split_qkv(t, op, name);
        const char* parts[] = {"query", "key", "value"};
        for (int i = 0; i < 3; ++i)
          out.emplace_back(hf_layer + "attention.attention." + parts[i] + "." + leaf,
                           qkv[size_t(i)]);
        continue;
      }
      bool mapped = false;
      for (const auto& [hf_sub, sub] : layer_map()) {
        leaf = lrest;
        if (!strip_prefix(leaf, sub)) continue;
        out.emplace_back(hf_layer + hf_sub + leaf, t.detach());
        mapped = true;
        break;
      }
      TS_CHECK(mapped, op, "expected a Tessera ViT tensor name, got '", name, "'");
    }
  }
  return out;
}

}  // namespace tessera::hf

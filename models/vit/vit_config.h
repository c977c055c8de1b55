// Vision Transformer configuration: a small struct with ViT-Base/16's defaults, the vit-tiny
// (CIFAR-sized) and vit-base-16 presets, and strict JSON reading.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tessera::vit {

struct ViTConfig {
  int64_t image_size = 224;  // square images
  int64_t patch_size = 16;
  int64_t in_channels = 3;
  int64_t num_classes = 1000;
  int64_t n_layers = 12;
  int64_t n_heads = 12;
  int64_t d_model = 768;
  int64_t mlp_hidden = 0;     // 0: 4 * d_model
  double dropout = 0.0;       // on the embeddings and after each residual projection
  double attn_dropout = 0.0;  // on the attention probabilities
  double ln_eps = 1e-12;      // Hugging Face's ViT value, so its checkpoints load unchanged
  double init_std = 0.02;
  bool checkpoint = false;  // activation checkpointing, block by block

  int64_t num_patches() const { return (image_size / patch_size) * (image_size / patch_size); }
  // Throws ValueError naming the field when a value is out of range.
  void validate() const;
  // Keys: the field names above, plus "preset" (vit-tiny, vit-base-16) whose values the other
  // keys override. Unknown keys and wrongly typed values throw naming the key.
  static ViTConfig from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;
};

// "vit-tiny" (32x32 images, patch 4, 10 classes, 4 layers of width 128), "vit-base-16".
std::vector<std::string> vit_preset_names();
ViTConfig vit_preset(const std::string& name);

}  // namespace tessera::vit

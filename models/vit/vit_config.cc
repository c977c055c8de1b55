// ViT configuration: presets, validation and strict JSON reading (see vit_config.h).
#include "models/vit/vit_config.h"

#include "core/error.h"
#include "models/nn/config_fields.h"

namespace tessera::vit {

namespace {

using nlohmann::json;

// Every JSON key of the configuration and the member it sets (one table for reading and writing).
std::vector<nn::ConfigField> fields(ViTConfig& c) {
  return {
      {"image_size", &c.image_size},   {"patch_size", &c.patch_size},
      {"in_channels", &c.in_channels}, {"num_classes", &c.num_classes},
      {"n_layers", &c.n_layers},       {"n_heads", &c.n_heads},
      {"d_model", &c.d_model},         {"mlp_hidden", &c.mlp_hidden},
      {"dropout", &c.dropout},         {"attn_dropout", &c.attn_dropout},
      {"ln_eps", &c.ln_eps},           {"init_std", &c.init_std},
      {"checkpoint", &c.checkpoint},
  };
}

}  // namespace

void ViTConfig::validate() const {
  TS_CHECK(patch_size > 0 && image_size > 0 && image_size % patch_size == 0, "ViTConfig",
           "expected image_size divisible by patch_size (both positive), got image_size ",
           image_size, " and patch_size ", patch_size);
  TS_CHECK(in_channels > 0, "ViTConfig", "expected in_channels > 0, got ", in_channels);
  TS_CHECK(num_classes > 0, "ViTConfig", "expected num_classes > 0, got ", num_classes);
  nn::validate_transformer("ViTConfig", n_layers, n_heads, d_model, mlp_hidden, "", dropout,
                           attn_dropout, ln_eps, init_std);
}

ViTConfig ViTConfig::from_json(const json& j) {
  ViTConfig c;
  if (auto preset = nn::config_preset(j, "ViTConfig")) c = vit_preset(*preset);
  nn::read_config_fields(j, "ViTConfig", fields(c));
  c.validate();
  return c;
}

json ViTConfig::to_json() const {
  ViTConfig copy = *this;
  return nn::config_fields_json(fields(copy));
}

std::vector<std::string> vit_preset_names() { return {"vit-tiny", "vit-base-16"}; }

ViTConfig vit_preset(const std::string& name) {
  ViTConfig c;  // ViT-Base/16 at 224 pixels, ImageNet's 1000 classes
  if (name == "vit-base-16") return c;
  if (name == "vit-tiny") {
    c.image_size = 32;
    c.patch_size = 4;
    c.num_classes = 10;
    c.n_layers = 4;
    c.n_heads = 4;
    c.d_model = 128;
    return c;
  }
  std::string names;
  for (const std::string& n : vit_preset_names()) names += (names.empty() ? "" : ", ") + n;
  TS_FAIL("vit_preset", "expected one of ", names, ", got '", name, "'");
}

}  // namespace tessera::vit

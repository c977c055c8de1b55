// ViT configuration: presets, validation and strict JSON reading (see vit_config.h).
#include "models/vit/vit_config.h"

#include "core/error.h"

namespace tessera::vit {

namespace {

using nlohmann::json;

constexpr const char* kKeys =
    "preset, image_size, patch_size, in_channels, num_classes, n_layers, n_heads, d_model, "
    "mlp_hidden, dropout, attn_dropout, ln_eps, init_std, checkpoint";

int64_t get_int(const json& v, const std::string& key) {
  TS_CHECK(v.is_number_integer(), "ViTConfig", "expected an integer for '", key, "', got ",
           v.dump());
  return v.get<int64_t>();
}
double get_double(const json& v, const std::string& key) {
  TS_CHECK(v.is_number(), "ViTConfig", "expected a number for '", key, "', got ", v.dump());
  return v.get<double>();
}
bool get_bool(const json& v, const std::string& key) {
  TS_CHECK(v.is_boolean(), "ViTConfig", "expected true or false for '", key, "', got ", v.dump());
  return v.get<bool>();
}

}  // namespace

void ViTConfig::validate() const {
  TS_CHECK(patch_size > 0 && image_size > 0 && image_size % patch_size == 0, "ViTConfig",
           "expected image_size divisible by patch_size (both positive), got image_size ",
           image_size, " and patch_size ", patch_size);
  TS_CHECK(in_channels > 0, "ViTConfig", "expected in_channels > 0, got ", in_channels);
  TS_CHECK(num_classes > 0, "ViTConfig", "expected num_classes > 0, got ", num_classes);
  TS_CHECK(n_layers > 0, "ViTConfig", "expected n_layers > 0, got ", n_layers);
  TS_CHECK(n_heads > 0 && d_model > 0 && d_model % n_heads == 0, "ViTConfig",
           "expected d_model divisible by n_heads (both positive), got d_model ", d_model,
           " and n_heads ", n_heads);
  TS_CHECK(mlp_hidden >= 0, "ViTConfig", "expected mlp_hidden >= 0, got ", mlp_hidden);
  TS_CHECK(dropout >= 0.0 && dropout < 1.0, "ViTConfig", "expected dropout in [0, 1), got ",
           dropout);
  TS_CHECK(attn_dropout >= 0.0 && attn_dropout < 1.0, "ViTConfig",
           "expected attn_dropout in [0, 1), got ", attn_dropout);
  TS_CHECK(ln_eps > 0.0, "ViTConfig", "expected ln_eps > 0, got ", ln_eps);
  TS_CHECK(init_std > 0.0, "ViTConfig", "expected init_std > 0, got ", init_std);
}

ViTConfig ViTConfig::from_json(const json& j) {
  TS_CHECK(j.is_object(), "ViTConfig", "expected a JSON object, got ", j.dump());
  ViTConfig c;
  if (j.contains("preset")) {
    TS_CHECK(j.at("preset").is_string(), "ViTConfig", "expected a preset name for 'preset', got ",
             j.at("preset").dump());
    c = vit_preset(j.at("preset").get<std::string>());
  }
  for (const auto& [key, v] : j.items()) {
    if (key == "preset") continue;
    if (key == "image_size")
      c.image_size = get_int(v, key);
    else if (key == "patch_size")
      c.patch_size = get_int(v, key);
    else if (key == "in_channels")
      c.in_channels = get_int(v, key);
    else if (key == "num_classes")
      c.num_classes = get_int(v, key);
    else if (key == "n_layers")
      c.n_layers = get_int(v, key);
    else if (key == "n_heads")
      c.n_heads = get_int(v, key);
    else if (key == "d_model")
      c.d_model = get_int(v, key);
    else if (key == "mlp_hidden")
      c.mlp_hidden = get_int(v, key);
    else if (key == "dropout")
      c.dropout = get_double(v, key);
    else if (key == "attn_dropout")
      c.attn_dropout = get_double(v, key);
    else if (key == "ln_eps")
      c.ln_eps = get_double(v, key);
    else if (key == "init_std")
      c.init_std = get_double(v, key);
    else if (key == "checkpoint")
      c.checkpoint = get_bool(v, key);
    else
      TS_FAIL("ViTConfig", "expected keys ", kKeys, ", got unknown key '", key, "'");
  }
  c.validate();
  return c;
}

json ViTConfig::to_json() const {
  return json{
      {"image_size", image_size},     {"patch_size", patch_size}, {"in_channels", in_channels},
      {"num_classes", num_classes},   {"n_layers", n_layers},     {"n_heads", n_heads},
      {"d_model", d_model},           {"mlp_hidden", mlp_hidden}, {"dropout", dropout},
      {"attn_dropout", attn_dropout}, {"ln_eps", ln_eps},         {"init_std", init_std},
      {"checkpoint", checkpoint}};
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

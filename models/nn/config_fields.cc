// Table-driven configuration reading and the shared transformer checks (see config_fields.h).
#include "models/nn/config_fields.h"

#include "core/error.h"

namespace tessera::nn {

using nlohmann::json;

std::optional<std::string> config_preset(const json& j, const char* owner) {
  TS_CHECK(j.is_object(), owner, "expected a JSON object, got ", j.dump());
  if (!j.contains("preset")) return std::nullopt;
  TS_CHECK(j.at("preset").is_string(), owner, "expected a preset name for 'preset', got ",
           j.at("preset").dump());
  return j.at("preset").get<std::string>();
}

namespace {

void set_field(int64_t* out, const json& v, const char* owner, const std::string& key) {
  TS_CHECK(v.is_number_integer(), owner, "expected an integer for '", key, "', got ", v.dump());
  *out = v.get<int64_t>();
}
void set_field(double* out, const json& v, const char* owner, const std::string& key) {
  TS_CHECK(v.is_number(), owner, "expected a number for '", key, "', got ", v.dump());
  *out = v.get<double>();
}
void set_field(bool* out, const json& v, const char* owner, const std::string& key) {
  TS_CHECK(v.is_boolean(), owner, "expected true or false for '", key, "', got ", v.dump());
  *out = v.get<bool>();
}

std::string key_list(const std::vector<ConfigField>& fields) {
  std::string keys = "preset";
  for (const ConfigField& f : fields) keys += std::string(", ") + f.key;
  return keys;
}

}  // namespace

void read_config_fields(const json& j, const char* owner, const std::vector<ConfigField>& fields) {
  for (const auto& [key, v] : j.items()) {
    if (key == "preset") continue;
    const ConfigField* field = nullptr;
    for (const ConfigField& f : fields)
      if (key == f.key) field = &f;
    TS_CHECK(field != nullptr, owner, "expected keys ", key_list(fields), ", got unknown key '",
             key, "'");
    std::visit([&](auto* out) { set_field(out, v, owner, key); }, field->value);
  }
}

json config_fields_json(const std::vector<ConfigField>& fields) {
  json j = json::object();
  for (const ConfigField& f : fields) std::visit([&](auto* value) { j[f.key] = *value; }, f.value);
  return j;
}

void validate_transformer(const char* owner, int64_t n_layers, int64_t n_heads, int64_t d_model,
                          int64_t mlp_hidden, const char* mlp_hidden_note, double dropout,
                          double attn_dropout, double ln_eps, double init_std) {
  TS_CHECK(n_layers > 0, owner, "expected n_layers > 0, got ", n_layers);
  TS_CHECK(n_heads > 0 && d_model > 0 && d_model % n_heads == 0, owner,
           "expected d_model divisible by n_heads (both positive), got d_model ", d_model,
           " and n_heads ", n_heads);
  TS_CHECK(mlp_hidden >= 0, owner, "expected mlp_hidden >= 0", mlp_hidden_note, ", got ",
           mlp_hidden);
  TS_CHECK(dropout >= 0.0 && dropout < 1.0, owner, "expected dropout in [0, 1), got ", dropout);
  TS_CHECK(attn_dropout >= 0.0 && attn_dropout < 1.0, owner,
           "expected attn_dropout in [0, 1), got ", attn_dropout);
  TS_CHECK(ln_eps > 0.0, owner, "expected ln_eps > 0, got ", ln_eps);
  TS_CHECK(init_std > 0.0, owner, "expected init_std > 0, got ", init_std);
}

}  // namespace tessera::nn

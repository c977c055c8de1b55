// Strict JSON reading and writing of a model configuration from one table of its fields, and the
// checks every transformer configuration shares, so GPT, BERT and ViT read and validate alike.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace tessera::nn {

// One field of a configuration struct: its JSON key and the member it fills.
struct ConfigField {
  const char* key;
  std::variant<int64_t*, double*, bool*> value;
};

// The "preset" name in j (a string) when it has one; throws when j is not an object.
std::optional<std::string> config_preset(const nlohmann::json& j, const char* owner);

// Sets every field named in j (skipping "preset"). A key not in `fields` is an error listing
// "preset" and every field key; a value of the wrong JSON type is an error naming the key.
void read_config_fields(const nlohmann::json& j, const char* owner,
                        const std::vector<ConfigField>& fields);

// {key: value} for every field.
nlohmann::json config_fields_json(const std::vector<ConfigField>& fields);

// The transformer shape and regularisation checks: positive layers, d_model divisible by n_heads,
// mlp_hidden >= 0 (mlp_hidden_note explains 0, e.g. " (0: 4 * d_model)"), dropouts in [0, 1),
// positive ln_eps and init_std.
void validate_transformer(const char* owner, int64_t n_layers, int64_t n_heads, int64_t d_model,
                          int64_t mlp_hidden, const char* mlp_hidden_note, double dropout,
                          double attn_dropout, double ln_eps, double init_std);

}  // namespace tessera::nn

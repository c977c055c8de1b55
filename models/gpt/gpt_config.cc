// GPT configuration: presets, validation and strict JSON reading (see gpt_config.h).
#include "models/gpt/gpt_config.h"

#include "core/error.h"
#include "models/nn/config_fields.h"

namespace tessera::gpt {

namespace {

using nlohmann::json;

// Every JSON key of the configuration and the member it sets (one table for reading and writing).
std::vector<nn::ConfigField> fields(GPTConfig& c) {
  return {
      {"vocab_size", &c.vocab_size}, {"context_length", &c.context_length},
      {"n_layers", &c.n_layers},     {"n_heads", &c.n_heads},
      {"d_model", &c.d_model},       {"mlp_hidden", &c.mlp_hidden},
      {"dropout", &c.dropout},       {"attn_dropout", &c.attn_dropout},
      {"ln_eps", &c.ln_eps},         {"bias", &c.bias},
      {"init_std", &c.init_std},     {"tie_embeddings", &c.tie_embeddings},
      {"checkpoint", &c.checkpoint},
  };
}

GPTConfig shape(int64_t vocab, int64_t ctx, int64_t layers, int64_t heads, int64_t width) {
  GPTConfig c;
  c.vocab_size = vocab;
  c.context_length = ctx;
  c.n_layers = layers;
  c.n_heads = heads;
  c.d_model = width;
  return c;
}

}  // namespace

void GPTConfig::validate() const {
  TS_CHECK(vocab_size > 0, "GPTConfig", "expected vocab_size > 0, got ", vocab_size);
  TS_CHECK(context_length > 0, "GPTConfig", "expected context_length > 0, got ", context_length);
  nn::validate_transformer("GPTConfig", n_layers, n_heads, d_model, mlp_hidden, " (0: 4 * d_model)",
                           dropout, attn_dropout, ln_eps, init_std);
}

GPTConfig GPTConfig::from_json(const json& j) {
  GPTConfig c;
  if (auto preset = nn::config_preset(j, "GPTConfig")) c = gpt_preset(*preset);
  nn::read_config_fields(j, "GPTConfig", fields(c));
  c.validate();
  return c;
}

json GPTConfig::to_json() const {
  GPTConfig copy = *this;
  return nn::config_fields_json(fields(copy));
}

std::vector<std::string> gpt_preset_names() {
  return {"gpt-tiny", "gpt-mini", "gpt2-124m", "gpt2-350m", "gpt2-1.3b", "gpt3-2.7b"};
}

GPTConfig gpt_preset(const std::string& name) {
  // Tiny presets read bytes (vocabulary 256) and train in minutes on 2 CPU cores.
  if (name == "gpt-tiny") return shape(256, 64, 2, 4, 128);
  if (name == "gpt-mini") return shape(256, 128, 4, 4, 256);
  // GPT-2 small and medium as released (vocabulary 50257, context 1024).
  if (name == "gpt2-124m") return shape(50257, 1024, 12, 12, 768);
  if (name == "gpt2-350m") return shape(50257, 1024, 24, 16, 1024);
  // The GPT-3 paper's XL shape (1.3B) with GPT-2's context, and its 2.7B shape (context 2048),
  // both with GPT-2's vocabulary.
  if (name == "gpt2-1.3b") return shape(50257, 1024, 24, 16, 2048);
  if (name == "gpt3-2.7b") return shape(50257, 2048, 32, 32, 2560);
  std::string names;
  for (const std::string& n : gpt_preset_names()) names += (names.empty() ? "" : ", ") + n;
  TS_FAIL("gpt_preset", "expected one of ", names, ", got '", name, "'");
}

int64_t gpt_num_parameters(const GPTConfig& c) {
  const int64_t d = c.d_model, hidden = c.mlp_hidden > 0 ? c.mlp_hidden : 4 * d;
  const int64_t b = c.bias ? 1 : 0;
  const int64_t ln = 2 * d;  // weight and bias
  const int64_t attn = d * 3 * d + b * 3 * d + d * d + b * d;
  const int64_t mlp = d * hidden + b * hidden + hidden * d + b * d;
  const int64_t head = c.tie_embeddings ? 0 : c.vocab_size * d;
  return c.vocab_size * d + c.context_length * d + c.n_layers * (2 * ln + attn + mlp) + ln + head;
}

}  // namespace tessera::gpt

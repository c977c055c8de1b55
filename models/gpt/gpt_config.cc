// GPT configuration: presets, validation and strict JSON reading (see gpt_config.h).
#include "models/gpt/gpt_config.h"

#include "core/error.h"

namespace tessera::gpt {

namespace {

using nlohmann::json;

constexpr const char* kKeys =
    "preset, vocab_size, context_length, n_layers, n_heads, d_model, mlp_hidden, dropout, "
    "attn_dropout, ln_eps, bias, init_std, tie_embeddings, checkpoint";

int64_t get_int(const json& v, const std::string& key) {
  TS_CHECK(v.is_number_integer(), "GPTConfig", "expected an integer for '", key, "', got ",
           v.dump());
  return v.get<int64_t>();
}
double get_double(const json& v, const std::string& key) {
  TS_CHECK(v.is_number(), "GPTConfig", "expected a number for '", key, "', got ", v.dump());
  return v.get<double>();
}
bool get_bool(const json& v, const std::string& key) {
  TS_CHECK(v.is_boolean(), "GPTConfig", "expected true or false for '", key, "', got ", v.dump());
  return v.get<bool>();
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
  TS_CHECK(n_layers > 0, "GPTConfig", "expected n_layers > 0, got ", n_layers);
  TS_CHECK(n_heads > 0 && d_model > 0 && d_model % n_heads == 0, "GPTConfig",
           "expected d_model divisible by n_heads (both positive), got d_model ", d_model,
           " and n_heads ", n_heads);
  TS_CHECK(mlp_hidden >= 0, "GPTConfig", "expected mlp_hidden >= 0 (0: 4 * d_model), got ",
           mlp_hidden);
  TS_CHECK(dropout >= 0.0 && dropout < 1.0, "GPTConfig", "expected dropout in [0, 1), got ",
           dropout);
  TS_CHECK(attn_dropout >= 0.0 && attn_dropout < 1.0, "GPTConfig",
           "expected attn_dropout in [0, 1), got ", attn_dropout);
  TS_CHECK(ln_eps > 0.0, "GPTConfig", "expected ln_eps > 0, got ", ln_eps);
  TS_CHECK(init_std > 0.0, "GPTConfig", "expected init_std > 0, got ", init_std);
}

GPTConfig GPTConfig::from_json(const json& j) {
  TS_CHECK(j.is_object(), "GPTConfig", "expected a JSON object, got ", j.dump());
  GPTConfig c;
  if (j.contains("preset")) {
    TS_CHECK(j.at("preset").is_string(), "GPTConfig", "expected a preset name for 'preset', got ",
             j.at("preset").dump());
    c = gpt_preset(j.at("preset").get<std::string>());
  }
  for (const auto& [key, v] : j.items()) {
    if (key == "preset") continue;
    if (key == "vocab_size")
      c.vocab_size = get_int(v, key);
    else if (key == "context_length")
      c.context_length = get_int(v, key);
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
    else if (key == "bias")
      c.bias = get_bool(v, key);
    else if (key == "init_std")
      c.init_std = get_double(v, key);
    else if (key == "tie_embeddings")
      c.tie_embeddings = get_bool(v, key);
    else if (key == "checkpoint")
      c.checkpoint = get_bool(v, key);
    else
      TS_FAIL("GPTConfig", "expected keys ", kKeys, ", got unknown key '", key, "'");
  }
  c.validate();
  return c;
}

json GPTConfig::to_json() const {
  return json{{"vocab_size", vocab_size}, {"context_length", context_length},
              {"n_layers", n_layers},     {"n_heads", n_heads},
              {"d_model", d_model},       {"mlp_hidden", mlp_hidden},
              {"dropout", dropout},       {"attn_dropout", attn_dropout},
              {"ln_eps", ln_eps},         {"bias", bias},
              {"init_std", init_std},     {"tie_embeddings", tie_embeddings},
              {"checkpoint", checkpoint}};
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

// BERT configuration: presets, validation and strict JSON reading (see bert_config.h).
#include "models/bert/bert_config.h"

#include "core/error.h"

namespace tessera::bert {

namespace {

using nlohmann::json;

constexpr const char* kKeys =
    "preset, vocab_size, max_positions, type_vocab_size, n_layers, n_heads, d_model, mlp_hidden, "
    "dropout, attn_dropout, ln_eps, init_std, mlm_head, num_labels, checkpoint";

int64_t get_int(const json& v, const std::string& key) {
  TS_CHECK(v.is_number_integer(), "BertConfig", "expected an integer for '", key, "', got ",
           v.dump());
  return v.get<int64_t>();
}
double get_double(const json& v, const std::string& key) {
  TS_CHECK(v.is_number(), "BertConfig", "expected a number for '", key, "', got ", v.dump());
  return v.get<double>();
}
bool get_bool(const json& v, const std::string& key) {
  TS_CHECK(v.is_boolean(), "BertConfig", "expected true or false for '", key, "', got ", v.dump());
  return v.get<bool>();
}

}  // namespace

void BertConfig::validate() const {
  TS_CHECK(vocab_size > 0, "BertConfig", "expected vocab_size > 0, got ", vocab_size);
  TS_CHECK(max_positions > 0, "BertConfig", "expected max_positions > 0, got ", max_positions);
  TS_CHECK(type_vocab_size > 0, "BertConfig", "expected type_vocab_size > 0, got ",
           type_vocab_size);
  TS_CHECK(n_layers > 0, "BertConfig", "expected n_layers > 0, got ", n_layers);
  TS_CHECK(n_heads > 0 && d_model > 0 && d_model % n_heads == 0, "BertConfig",
           "expected d_model divisible by n_heads (both positive), got d_model ", d_model,
           " and n_heads ", n_heads);
  TS_CHECK(mlp_hidden >= 0, "BertConfig", "expected mlp_hidden >= 0, got ", mlp_hidden);
  TS_CHECK(dropout >= 0.0 && dropout < 1.0, "BertConfig", "expected dropout in [0, 1), got ",
           dropout);
  TS_CHECK(attn_dropout >= 0.0 && attn_dropout < 1.0, "BertConfig",
           "expected attn_dropout in [0, 1), got ", attn_dropout);
  TS_CHECK(ln_eps > 0.0, "BertConfig", "expected ln_eps > 0, got ", ln_eps);
  TS_CHECK(init_std > 0.0, "BertConfig", "expected init_std > 0, got ", init_std);
  TS_CHECK(num_labels >= 0, "BertConfig", "expected num_labels >= 0, got ", num_labels);
}

BertConfig BertConfig::from_json(const json& j) {
  TS_CHECK(j.is_object(), "BertConfig", "expected a JSON object, got ", j.dump());
  BertConfig c;
  if (j.contains("preset")) {
    TS_CHECK(j.at("preset").is_string(), "BertConfig", "expected a preset name for 'preset', got ",
             j.at("preset").dump());
    c = bert_preset(j.at("preset").get<std::string>());
  }
  for (const auto& [key, v] : j.items()) {
    if (key == "preset") continue;
    if (key == "vocab_size")
      c.vocab_size = get_int(v, key);
    else if (key == "max_positions")
      c.max_positions = get_int(v, key);
    else if (key == "type_vocab_size")
      c.type_vocab_size = get_int(v, key);
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
    else if (key == "mlm_head")
      c.mlm_head = get_bool(v, key);
    else if (key == "num_labels")
      c.num_labels = get_int(v, key);
    else if (key == "checkpoint")
      c.checkpoint = get_bool(v, key);
    else
      TS_FAIL("BertConfig", "expected keys ", kKeys, ", got unknown key '", key, "'");
  }
  c.validate();
  return c;
}

json BertConfig::to_json() const {
  return json{{"vocab_size", vocab_size},
              {"max_positions", max_positions},
              {"type_vocab_size", type_vocab_size},
              {"n_layers", n_layers},
              {"n_heads", n_heads},
              {"d_model", d_model},
              {"mlp_hidden", mlp_hidden},
              {"dropout", dropout},
              {"attn_dropout", attn_dropout},
              {"ln_eps", ln_eps},
              {"init_std", init_std},
              {"mlm_head", mlm_head},
              {"num_labels", num_labels},
              {"checkpoint", checkpoint}};
}

std::vector<std::string> bert_preset_names() { return {"bert-tiny", "bert-base"}; }

BertConfig bert_preset(const std::string& name) {
  BertConfig c;  // bert-base (uncased vocabulary)
  if (name == "bert-base") return c;
  if (name == "bert-tiny") {
    c.n_layers = 2;
    c.n_heads = 2;
    c.d_model = 128;
    c.mlp_hidden = 512;
    return c;
  }
  std::string names;
  for (const std::string& n : bert_preset_names()) names += (names.empty() ? "" : ", ") + n;
  TS_FAIL("bert_preset", "expected one of ", names, ", got '", name, "'");
}

}  // namespace tessera::bert

// BERT configuration: presets, validation and strict JSON reading (see bert_config.h).
#include "models/bert/bert_config.h"

#include "core/error.h"
#include "models/nn/config_fields.h"

namespace tessera::bert {

namespace {

using nlohmann::json;

// Every JSON key of the configuration and the member it sets (one table for reading and writing).
std::vector<nn::ConfigField> fields(BertConfig& c) {
  return {
      {"vocab_size", &c.vocab_size},
      {"max_positions", &c.max_positions},
      {"type_vocab_size", &c.type_vocab_size},
      {"n_layers", &c.n_layers},
      {"n_heads", &c.n_heads},
      {"d_model", &c.d_model},
      {"mlp_hidden", &c.mlp_hidden},
      {"dropout", &c.dropout},
      {"attn_dropout", &c.attn_dropout},
      {"ln_eps", &c.ln_eps},
      {"init_std", &c.init_std},
      {"mlm_head", &c.mlm_head},
      {"num_labels", &c.num_labels},
      {"checkpoint", &c.checkpoint},
  };
}

}  // namespace

void BertConfig::validate() const {
  TS_CHECK(vocab_size > 0, "BertConfig", "expected vocab_size > 0, got ", vocab_size);
  TS_CHECK(max_positions > 0, "BertConfig", "expected max_positions > 0, got ", max_positions);
  TS_CHECK(type_vocab_size > 0, "BertConfig", "expected type_vocab_size > 0, got ",
           type_vocab_size);
  nn::validate_transformer("BertConfig", n_layers, n_heads, d_model, mlp_hidden, "", dropout,
                           attn_dropout, ln_eps, init_std);
  TS_CHECK(num_labels >= 0, "BertConfig", "expected num_labels >= 0, got ", num_labels);
}

BertConfig BertConfig::from_json(const json& j) {
  BertConfig c;
  if (auto preset = nn::config_preset(j, "BertConfig")) c = bert_preset(*preset);
  nn::read_config_fields(j, "BertConfig", fields(c));
  c.validate();
  return c;
}

json BertConfig::to_json() const {
  BertConfig copy = *this;
  return nn::config_fields_json(fields(copy));
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

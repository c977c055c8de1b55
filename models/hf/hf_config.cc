// config.json for Hugging Face BERT and ViT, both ways (see export_hf.h). GPT-2's pair lives in
// export_hf.cc.
#include <algorithm>

#include "core/error.h"
#include "models/hf/export_hf.h"

namespace tessera::hf {

namespace {

// transformers writes the label names of a classifier as id2label / label2id; num_labels is
// derived from them when the config is read back.
void add_labels(nlohmann::json& j, int64_t n) {
  nlohmann::json id2label = nlohmann::json::object(), label2id = nlohmann::json::object();
  for (int64_t i = 0; i < n; ++i) {
    const std::string label = "LABEL_" + std::to_string(i);
    id2label[std::to_string(i)] = label;
    label2id[label] = i;
  }
  j["id2label"] = id2label;
  j["label2id"] = label2id;
}

int64_t labels_of(const nlohmann::json& hf) {
  if (hf.contains("id2label") && hf["id2label"].is_object()) return int64_t(hf["id2label"].size());
  return hf.value("num_labels", int64_t(2));  // PretrainedConfig's default
}

bool lists(const nlohmann::json& hf, const std::string& architecture) {
  if (!hf.contains("architectures") || !hf["architectures"].is_array()) return false;
  const auto& a = hf["architectures"];
  return std::find(a.begin(), a.end(), architecture) != a.end();
}

void check_type(const nlohmann::json& hf, const std::string& type, const std::string& where) {
  TS_CHECK(hf.is_object() && hf.value("model_type", "") == type, "hf config", where,
           ": expected a ", type, " config.json (\"model_type\": \"", type, "\"), got ",
           hf.is_object() ? "model_type '" + hf.value("model_type", std::string("none")) + "'"
                          : hf.dump());
  // Our BERT and ViT blocks use the exact (erf) GELU, Hugging Face's "gelu".
  const std::string act = hf.value("hidden_act", std::string("gelu"));
  TS_CHECK(act == "gelu", "hf config", where, ": expected the exact GELU (hidden_act gelu) of our ",
           type, ", got '", act, "'");
}

// The transformer-encoder fields BERT's and ViT's configs share (BertConfig / ViTConfig name
// them alike here); the intermediate size is left to each, whose conventions differ.
template <typename Config>
void put_encoder(nlohmann::json& j, const Config& c) {
  j["hidden_size"] = c.d_model;
  j["num_hidden_layers"] = c.n_layers;
  j["num_attention_heads"] = c.n_heads;
  j["intermediate_size"] = c.mlp_hidden == 0 ? 4 * c.d_model : c.mlp_hidden;
  j["hidden_act"] = "gelu";
  j["hidden_dropout_prob"] = c.dropout;
  j["attention_probs_dropout_prob"] = c.attn_dropout;
  j["initializer_range"] = c.init_std;
  j["layer_norm_eps"] = c.ln_eps;
}

template <typename Config>
void get_encoder(const nlohmann::json& hf, Config& c) {
  c.d_model = hf.value("hidden_size", c.d_model);
  c.n_layers = hf.value("num_hidden_layers", c.n_layers);
  c.n_heads = hf.value("num_attention_heads", c.n_heads);
  c.dropout = hf.value("hidden_dropout_prob", c.dropout);
  c.attn_dropout = hf.value("attention_probs_dropout_prob", c.attn_dropout);
  c.init_std = hf.value("initializer_range", c.init_std);
  c.ln_eps = hf.value("layer_norm_eps", c.ln_eps);
}

}  // namespace

nlohmann::json bert_hf_config(const bert::BertConfig& c) {
  nlohmann::json arch = nlohmann::json::array();
  if (c.mlm_head) arch.push_back("BertForMaskedLM");
  if (c.num_labels > 0) arch.push_back("BertForSequenceClassification");
  if (arch.empty()) arch.push_back("BertModel");
  nlohmann::json j = {{"architectures", arch},
                      {"model_type", "bert"},
                      {"vocab_size", c.vocab_size},
                      {"max_position_embeddings", c.max_positions},
                      {"type_vocab_size", c.type_vocab_size},
                      {"position_embedding_type", "absolute"},
                      {"tie_word_embeddings", true}};
  put_encoder(j, c);
  if (c.num_labels > 0) add_labels(j, c.num_labels);
  return j;
}

bert::BertConfig bert_config_from_hf(const nlohmann::json& hf, const std::string& where) {
  check_type(hf, "bert", where);
  const std::string pos = hf.value("position_embedding_type", std::string("absolute"));
  TS_CHECK(pos == "absolute", "hf config", where,
           ": expected absolute position embeddings (position_embedding_type absolute), got '", pos,
           "'");
  TS_CHECK(!hf.value("is_decoder", false), "hf config", where,
           ": expected a BERT encoder, got is_decoder true");
  bert::BertConfig c;
  get_encoder(hf, c);
  c.vocab_size = hf.value("vocab_size", c.vocab_size);
  c.mlp_hidden = hf.value("intermediate_size", c.mlp_hidden);
  c.max_positions = hf.value("max_position_embeddings", c.max_positions);
  c.type_vocab_size = hf.value("type_vocab_size", c.type_vocab_size);
  c.mlm_head = lists(hf, "BertForMaskedLM") || lists(hf, "BertForPreTraining");
  c.num_labels = lists(hf, "BertForSequenceClassification") ? labels_of(hf) : 0;
  c.validate();
  return c;
}

nlohmann::json vit_hf_config(const vit::ViTConfig& c) {
  nlohmann::json j = {{"architectures", {"ViTForImageClassification"}},
                      {"model_type", "vit"},
                      {"image_size", c.image_size},
                      {"patch_size", c.patch_size},
                      {"num_channels", c.in_channels},
                      {"qkv_bias", true},
                      {"encoder_stride", c.patch_size}};
  put_encoder(j, c);
  add_labels(j, c.num_classes);
  return j;
}

vit::ViTConfig vit_config_from_hf(const nlohmann::json& hf, const std::string& where) {
  check_type(hf, "vit", where);
  TS_CHECK(hf.value("qkv_bias", true), "hf config", where,
           ": expected query / key / value biases (qkv_bias true), got qkv_bias false");
  vit::ViTConfig c;
  c.image_size = hf.value("image_size", c.image_size);
  c.patch_size = hf.value("patch_size", c.patch_size);
  c.in_channels = hf.value("num_channels", c.in_channels);
  get_encoder(hf, c);
  const int64_t hidden = hf.value("intermediate_size", int64_t(3072));
  c.mlp_hidden = hidden == 4 * c.d_model ? 0 : hidden;  // 0 is ViTConfig's "4 * d_model"
  c.num_classes = labels_of(hf);
  c.validate();
  return c;
}

}  // namespace tessera::hf

// Hugging Face model directories from Tessera models (see export_hf.h).
#include "models/hf/export_hf.h"

#include <filesystem>

#include "core/error.h"
#include "models/io/atomic_file.h"
#include "models/io/safetensors.h"

namespace tessera::hf {

namespace {

// One fresh directory, whole or not at all: the tensors in Hugging Face's layout and config.json.
void write_hf_directory(const NamedTensors& hf, const nlohmann::json& config,
                        const std::string& dir, const char* op) {
  io::write_directory_atomic(dir, op, [&](const std::string& tmp) {
    io::save_safetensors(tmp + "/model.safetensors", hf, {{"format", "pt"}});
    io::write_file_atomic(tmp + "/config.json", config.dump(2) + "\n");
  });
}

}  // namespace

nlohmann::json gpt2_hf_config(const gpt::GPTConfig& c) {
  return {{"architectures", {"GPT2LMHeadModel"}},
          {"model_type", "gpt2"},
          {"vocab_size", c.vocab_size},
          {"n_positions", c.context_length},
          {"n_ctx", c.context_length},
          {"n_embd", c.d_model},
          {"n_layer", c.n_layers},
          {"n_head", c.n_heads},
          {"n_inner", c.mlp_hidden == 0 ? nlohmann::json(nullptr) : nlohmann::json(c.mlp_hidden)},
          {"activation_function", "gelu_new"},  // GPT-2's tanh GELU, as our GPT blocks use
          {"layer_norm_epsilon", c.ln_eps},
          {"resid_pdrop", c.dropout},
          {"embd_pdrop", c.dropout},
          {"attn_pdrop", c.attn_dropout},
          {"initializer_range", c.init_std},
          {"tie_word_embeddings", c.tie_embeddings}};
}

gpt::GPTConfig gpt_config_from_hf(const nlohmann::json& hf, const std::string& where) {
  const char* op = "hf config";
  TS_CHECK(hf.is_object() && hf.value("model_type", "") == "gpt2", op, where,
           ": expected a GPT-2 config.json (\"model_type\": \"gpt2\"), got ",
           hf.is_object() ? "model_type '" + hf.value("model_type", std::string("none")) + "'"
                          : hf.dump());
  const std::string act = hf.value("activation_function", std::string("gelu_new"));
  TS_CHECK(act == "gelu_new" || act == "gelu_pytorch_tanh", op, where,
           ": expected GPT-2's tanh GELU (activation_function gelu_new), got '", act, "'");
  gpt::GPTConfig c;
  c.vocab_size = hf.value("vocab_size", int64_t(50257));
  c.context_length = hf.value("n_positions", int64_t(1024));
  c.d_model = hf.value("n_embd", int64_t(768));
  c.n_layers = hf.value("n_layer", int64_t(12));
  c.n_heads = hf.value("n_head", int64_t(12));
  c.mlp_hidden =
      hf.contains("n_inner") && !hf["n_inner"].is_null() ? hf["n_inner"].get<int64_t>() : 0;
  c.ln_eps = hf.value("layer_norm_epsilon", 1e-5);
  c.tie_embeddings = hf.value("tie_word_embeddings", true);
  c.init_std = hf.value("initializer_range", 0.02);
  c.dropout = 0.0;  // evaluation and generation: dropout is off anyway
  c.attn_dropout = 0.0;
  c.validate();
  return c;
}

void export_hf_gpt2(const NamedTensors& state, const gpt::GPTConfig& config,
                    const std::string& dir) {
  const char* op = "export_hf_gpt2";
  TS_CHECK(config.bias, op,
           "expected a GPT with biases (Hugging Face's GPT-2 has them in every "
           "Linear and LayerNorm), got model.bias false");
  TS_CHECK(!std::filesystem::exists(dir), op, "expected a new output directory, got existing '",
           dir, "'");
  write_hf_directory(to_hf_gpt2(state), gpt2_hf_config(config), dir, op);
}

void export_hf_bert(const NamedTensors& state, const bert::BertConfig& config,
                    const std::string& dir) {
  const char* op = "export_hf_bert";
  TS_CHECK(!std::filesystem::exists(dir), op, "expected a new output directory, got existing '",
           dir, "'");
  write_hf_directory(to_hf_bert(state), bert_hf_config(config), dir, op);
}

void export_hf_vit(const NamedTensors& state, const vit::ViTConfig& config,
                   const std::string& dir) {
  const char* op = "export_hf_vit";
  TS_CHECK(!std::filesystem::exists(dir), op, "expected a new output directory, got existing '",
           dir, "'");
  write_hf_directory(to_hf_vit(state, config), vit_hf_config(config), dir, op);
}

}  // namespace tessera::hf

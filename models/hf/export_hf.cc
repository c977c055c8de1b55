// Hugging Face model directories from Tessera models (see export_hf.h).
#include "models/hf/export_hf.h"

#include <stdlib.h>

#include <filesystem>
#include <system_error>

#include "core/error.h"
#include "models/io/atomic_file.h"
#include "models/io/safetensors.h"

namespace tessera::hf {

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

void export_hf_gpt2(const NamedTensors& state, const gpt::GPTConfig& config,
                    const std::string& dir) {
  const char* op = "export_hf_gpt2";
  namespace fs = std::filesystem;
  TS_CHECK(config.bias, op, "expected a GPT with biases (Hugging Face's GPT-2 has them in every "
           "Linear and LayerNorm), got model.bias false");
  TS_CHECK(!fs::exists(dir), op, "expected a new output directory, got existing '", dir, "'");
  const NamedTensors hf = to_hf_gpt2(state);
  // Both files in a temporary sibling, then one rename: the directory appears whole or not at all.
  const fs::path target = fs::absolute(dir);
  fs::create_directories(target.parent_path());
  std::string pattern = (target.parent_path() / (target.filename().string() + ".tmp-XXXXXX")).string();
  TS_CHECK(::mkdtemp(pattern.data()) != nullptr, op, "cannot create a directory beside '", dir, "'");
  try {
    io::save_safetensors(pattern + "/model.safetensors", hf, {{"format", "pt"}});
    io::write_file_atomic(pattern + "/config.json", gpt2_hf_config(config).dump(2) + "\n");
    std::error_code ec;
    fs::rename(pattern, target, ec);
    TS_CHECK(!ec, op, "cannot rename ", pattern, " to ", dir, ": ", ec.message());
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(pattern, ignored);
    throw;
  }
}

}  // namespace tessera::hf

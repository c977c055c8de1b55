// An outside program, built by the install test with CMake (find_package(Tessera)) against an
// installed Tessera: writes a tiny GPT-2 in Hugging Face's model.safetensors layout
// ("transformer." names, Conv1D (in, out) weights, attention mask buffers, tied head), loads it
// into a freshly initialised GPT with hf::load_hf_gpt2 and prints the loss. Exits non-zero unless
// the loss is finite and equals the loss of the model the file was written from.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include "models/gpt/gpt.h"
#include "models/hf/load_hf.h"
#include "models/io/safetensors.h"
#include "tessera.h"

namespace {

using namespace tessera;

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Our parameters in GPT2LMHeadModel's naming and layout: Linear (out, in) back to Conv1D (in, out);
// the head is tied, so the file has no lm_head.weight.
io::NamedTensors to_hf(const gpt::GPT& model) {
  io::NamedTensors hf;
  for (const auto& [name, t] : model.named_parameters()) {
    if (name == "lm_head.weight") continue;
    const bool conv1d =
        name.rfind("h.", 0) == 0 && ends_with(name, ".weight") &&
        (name.find(".c_attn.") != std::string::npos || name.find(".c_proj.") != std::string::npos ||
         name.find(".c_fc.") != std::string::npos);
    hf.emplace_back("transformer." + name, conv1d ? t.transpose(0, 1).contiguous() : t);
  }
  const int64_t T = model.config().context_length;
  for (int64_t i = 0; i < model.config().n_layers; ++i) {
    const std::string block = "transformer.h." + std::to_string(i) + ".attn.";
    std::vector<float> mask(size_t(T * T));
    for (int64_t r = 0; r < T; ++r)
      for (int64_t c = 0; c <= r; ++c) mask[size_t(r * T + c)] = 1;
    hf.emplace_back(block + "bias", from_vector(mask, {1, 1, T, T}));
    hf.emplace_back(block + "masked_bias", scalar_tensor(-1e4));
  }
  return hf;
}

double loss_of(gpt::GPT& model, const Tensor& ids, const Tensor& targets) {
  autograd::NoGradGuard no_grad;
  return model.loss(ids, targets).item();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string dir = argc > 1 ? argv[1] : std::filesystem::temp_directory_path().string();
    const std::string path = dir + "/model.safetensors";

    gpt::GPTConfig config;
    config.vocab_size = 96;
    config.context_length = 16;
    config.n_layers = 2;
    config.n_heads = 2;
    config.d_model = 24;
    Generator source_gen(7), target_gen(8);
    gpt::GPT source(config, source_gen);
    io::save_safetensors(path, to_hf(source));

    std::vector<int64_t> ids_v, targets_v;
    for (int64_t i = 0; i < 2 * 16; ++i) {
      ids_v.push_back((i * 37 + 5) % config.vocab_size);
      targets_v.push_back((i * 53 + 11) % config.vocab_size);
    }
    const Tensor ids = from_vector<int64_t>(ids_v, {2, 16});
    const Tensor targets = from_vector<int64_t>(targets_v, {2, 16});
    const double expected = loss_of(source, ids, targets);

    gpt::GPT model(config, target_gen);
    const double before = loss_of(model, ids, targets);
    const nn::LoadResult r = hf::load_hf_gpt2(model, path);
    const double loss = loss_of(model, ids, targets);
    std::printf("loss %.6f (file's model %.6f, before loading %.6f)\n", loss, expected, before);

    if (!r.missing_keys.empty() || !r.unexpected_keys.empty()) {
      std::fprintf(stderr, "expected every key to load, got %zu missing and %zu unexpected\n",
                   r.missing_keys.size(), r.unexpected_keys.size());
      return 1;
    }
    if (!std::isfinite(loss)) {
      std::fprintf(stderr, "expected a finite loss, got %g\n", loss);
      return 1;
    }
    if (std::abs(loss - expected) > 1e-5 * std::abs(expected) || loss == before) {
      std::fprintf(stderr, "expected the loaded model's loss %g to equal the file's model's %g\n",
                   loss, expected);
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}

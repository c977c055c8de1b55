// GPT against the PyTorch reference (gen_gpt_fixture.py: a GPT-2 in Hugging Face's naming and
// Conv1D layout, float64 from float32-exact weights): the Hugging Face tensors are mapped with
// hf::from_hf_gpt2 (in memory and through a safetensors file), then logits, loss, every parameter
// gradient and the losses of 20 AdamW steps must match within 1e-4 relative.
#include <catch2/catch.hpp>

#include "autograd/ops.h"
#include "models/gpt/gpt.h"
#include <filesystem>
#include <map>

#include "models/hf/export_hf.h"
#include "models/hf/load_hf.h"
#include "models/io/atomic_file.h"
#include "models/io/safetensors.h"
#include "optim/adam.h"
#include "tests/models/gpt/model_fixture.h"
#include "tests/testing/compare.h"

namespace tessera::gpt {
namespace {

using testing::require_close;
using testing::require_scalar_close;

constexpr double kRtol = 1e-4;

const testing::ModelFixture& fixture() {
  static const testing::ModelFixture f =
      testing::load_model_fixture("tests/models/gpt/fixtures/gpt2_small.json");
  return f;
}

std::shared_ptr<GPT> reference_model(bool checkpoint = false) {
  GPTConfig config = GPTConfig::from_json(fixture().config);
  config.checkpoint = checkpoint;
  Generator gen(1);
  auto model = std::make_shared<GPT>(config, gen);
  hf::load_mapped(*model, hf::from_hf_gpt2(fixture().hf_params), {}, true, "fixture");
  return model;
}

TEST_CASE("GPT logits, loss and every parameter gradient match PyTorch", "[gpt][reference]") {
  const auto& f = fixture();
  for (bool checkpoint : {false, true}) {
    INFO("activation checkpointing " << checkpoint);
    auto model = reference_model(checkpoint);
    Tensor logits = model->forward(f.inputs.at("ids"));
    require_close(logits, f.outputs.at("logits"), kRtol, 1e-5);
    Tensor loss = model->loss(f.inputs.at("ids"), f.inputs.at("targets"));
    require_scalar_close(loss.item(), f.loss, kRtol, 0.0, "loss");
    autograd::backward({loss});
    // The tied head: one tensor whose gradient sums the embedding and head uses, as in PyTorch.
    REQUIRE(model->lm_head()->weight().is_same(model->wte()->weight()));
    const size_t n =
        testing::require_grads_close(*model, hf::from_hf_gpt2(f.hf_grads), kRtol, 1e-6);
    CHECK(n == model->parameters().size());
    CHECK(n == 2 + 12 * 2 + 2);  // wte, wpe, 12 per block, ln_f (lm_head is wte)
  }
}

TEST_CASE("GPT: 20 AdamW steps give PyTorch's losses", "[gpt][reference][optim]") {
  const auto& f = fixture();
  auto model = reference_model();
  optim::AdamW opt(model->parameters(), {.lr = f.adamw.lr,
                                         .beta1 = f.adamw.beta1,
                                         .beta2 = f.adamw.beta2,
                                         .eps = f.adamw.eps,
                                         .weight_decay = f.adamw.weight_decay});
  REQUIRE(f.adamw.losses.size() == 20);
  for (size_t step = 0; step < f.adamw.losses.size(); ++step) {
    opt.zero_grad();
    Tensor loss = model->loss(f.inputs.at("ids"), f.inputs.at("targets"));
    require_scalar_close(loss.item(), f.adamw.losses[step], kRtol, 0.0,
                         "loss before step " + std::to_string(step));
    autograd::backward({loss});
    opt.step();
  }
  // The run learns: the batch is memorised well below the starting loss.
  CHECK(f.adamw.losses.back() < 0.25 * f.adamw.losses.front());
}

TEST_CASE("GPT-2 weights from a Hugging Face safetensors file give PyTorch's logits",
          "[gpt][reference][hf]") {
  const auto& f = fixture();
  const std::string path = testing::scratch_path("gpt2_hf.safetensors");
  io::save_safetensors(path, f.hf_params);
  GPTConfig config = GPTConfig::from_json(f.config);
  Generator gen(2);
  GPT model(config, gen);
  nn::LoadResult r = hf::load_hf_gpt2(model, path);
  CHECK(r.missing_keys.empty());
  CHECK(r.unexpected_keys.empty());
  autograd::NoGradGuard no_grad;
  require_close(model.forward(f.inputs.at("ids")), f.outputs.at("logits"), kRtol, 1e-5);

  // A file for another shape names the tensor and the file.
  GPTConfig wider = config;
  wider.d_model = 48;
  GPT other(wider, gen);
  try {
    hf::load_hf_gpt2(other, path);
    FAIL("expected a shape mismatch");
  } catch (const ValueError& e) {
    const std::string msg = e.what();
    CHECK(msg.find(path) != std::string::npos);
    CHECK(msg.find("wte.weight") != std::string::npos);
  }
}

TEST_CASE("Export gives back Hugging Face's GPT-2 tensors, and a directory that loads",
          "[gpt][reference][hf]") {
  const auto& f = fixture();
  auto model = reference_model();
  std::map<std::string, Tensor> exported;
  for (const auto& [name, t] : hf::to_hf_gpt2(model->state_dict())) exported[name] = t;
  size_t compared = 0;
  for (const auto& [hf_name, t] : f.hf_params) {
    const std::string name =
        hf_name.rfind("transformer.", 0) == 0 || hf_name == "lm_head.weight" ? hf_name
                                                                              : "transformer." + hf_name;
    const bool buffer = name.size() > 10 && (name.substr(name.size() - 10) == ".attn.bias" ||
                                             name.find("masked_bias") != std::string::npos);
    if (buffer || name == "lm_head.weight") continue;  // the causal masks; the tied head
    INFO(name);
    REQUIRE(exported.count(name) == 1);
    require_close(exported[name], t.to(exported[name].dtype()), 0.0, 0.0);
    ++compared;
  }
  CHECK(compared == exported.size());  // nothing more: the tied head is left out

  const std::string dir = testing::scratch_path("gpt2_export");
  std::filesystem::remove_all(dir);
  hf::export_hf_gpt2(model->state_dict(), model->config(), dir);
  const nlohmann::json config = nlohmann::json::parse(io::read_file(dir + "/config.json", "test"));
  CHECK(config["model_type"] == "gpt2");
  CHECK(config["n_layer"] == model->config().n_layers);
  CHECK(config["n_embd"] == model->config().d_model);
  // Read back, the config builds the same model (what tessera eval / generate --hf do).
  const GPTConfig back = hf::gpt_config_from_hf(config, "config.json");
  CHECK(back.to_json() == GPTConfig(model->config()).to_json());
  CHECK_THROWS_WITH(hf::gpt_config_from_hf({{"model_type", "bert"}}, "x/config.json"),
                    Catch::Contains("x/config.json: expected a GPT-2 config.json"));
  Generator gen(5);
  GPT other(model->config(), gen);
  nn::LoadResult r = hf::load_hf_gpt2(other, dir + "/model.safetensors");
  CHECK(r.missing_keys.empty());
  autograd::NoGradGuard no_grad;
  require_close(other.forward(f.inputs.at("ids")), model->forward(f.inputs.at("ids")), 0.0, 0.0);
  CHECK_THROWS_WITH(hf::export_hf_gpt2(model->state_dict(), model->config(), dir),
                    Catch::Contains("expected a new output directory"));
}

}  // namespace
}  // namespace tessera::gpt

// ViT against the PyTorch reference (gen_vit_fixture.py: Hugging Face's ViTForImageClassification
// naming and layout, Conv2d patch projection, float64 from float32-exact weights): weights mapped
// with hf::from_hf_vit (in memory and through a safetensors file), then logits, loss, every
// parameter gradient and the losses of 20 AdamW steps must match within 1e-4 relative.
#include <catch2/catch.hpp>

#include "autograd/ops.h"
#include "models/hf/load_hf.h"
#include "models/io/safetensors.h"
#include "models/vit/vit.h"
#include "optim/adam.h"
#include "tests/models/gpt/model_fixture.h"
#include "tests/testing/compare.h"

namespace tessera::vit {
namespace {

using testing::require_close;
using testing::require_scalar_close;

constexpr double kRtol = 1e-4;

const testing::ModelFixture& fixture() {
  static const testing::ModelFixture f =
      testing::load_model_fixture("tests/models/vit/fixtures/vit_tiny.json");
  return f;
}

std::shared_ptr<ViT> reference_model(bool checkpoint = false) {
  ViTConfig config = ViTConfig::from_json(fixture().config);
  config.checkpoint = checkpoint;
  Generator gen(1);
  auto model = std::make_shared<ViT>(config, gen);
  hf::load_mapped(*model, hf::from_hf_vit(fixture().hf_params), {}, true, "fixture");
  return model;
}

TEST_CASE("ViT logits, loss and every parameter gradient match PyTorch", "[vit][reference]") {
  const auto& f = fixture();
  for (bool checkpoint : {false, true}) {
    INFO("activation checkpointing " << checkpoint);
    auto model = reference_model(checkpoint);
    require_close(model->forward(f.inputs.at("images")), f.outputs.at("logits"), kRtol, 1e-5);
    Tensor loss = model->loss(f.inputs.at("images"), f.inputs.at("labels"));
    require_scalar_close(loss.item(), f.loss, kRtol, 0.0, "loss");
    autograd::backward({loss});
    const size_t n = testing::require_grads_close(*model, hf::from_hf_vit(f.hf_grads), kRtol, 1e-6);
    // patch projection 2, class token, positions, 12 per block, final norm 2, classifier 2.
    CHECK(n == 2 + 2 + 12 * 2 + 2 + 2);
  }
}

TEST_CASE("ViT: 20 AdamW steps give PyTorch's losses", "[vit][reference][optim]") {
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
    Tensor loss = model->loss(f.inputs.at("images"), f.inputs.at("labels"));
    require_scalar_close(loss.item(), f.adamw.losses[step], kRtol, 0.0,
                         "loss before step " + std::to_string(step));
    autograd::backward({loss});
    opt.step();
  }
  CHECK(f.adamw.losses.back() < 0.25 * f.adamw.losses.front());
}

TEST_CASE("ViT weights from a Hugging Face safetensors file", "[vit][reference][hf]") {
  const auto& f = fixture();
  const std::string path = testing::scratch_path("vit_hf.safetensors");
  io::save_safetensors(path, f.hf_params);
  ViTConfig config = ViTConfig::from_json(f.config);
  Generator gen(2);
  ViT model(config, gen);
  nn::LoadResult r = hf::load_hf_vit(model, path);
  CHECK(r.missing_keys.empty());
  CHECK(r.unexpected_keys.empty());
  autograd::NoGradGuard no_grad;
  require_close(model.forward(f.inputs.at("images")), f.outputs.at("logits"), kRtol, 1e-5);

  // Another label set: without its classifier the backbone loads; with it, the shape error names
  // the tensor and the file.
  ViTConfig ten = config;
  ten.num_classes = 10;
  ViT other(ten, gen);
  r = hf::load_hf_vit(other, path, {.load_heads = false});
  CHECK(r.missing_keys.size() == 2);
  try {
    hf::load_hf_vit(other, path);
    FAIL("expected a shape mismatch");
  } catch (const ValueError& e) {
    const std::string msg = e.what();
    CHECK(msg.find("head.head.weight") != std::string::npos);
    CHECK(msg.find(path) != std::string::npos);
  }
}

}  // namespace
}  // namespace tessera::vit

// ViT without a reference: strict JSON configs, preset parameter counts, input checks, and the
// Hugging Face ViT name mapping on synthetic tensors.
#include "models/vit/vit.h"

#include <catch2/catch.hpp>
#include <functional>
#include <map>

#include "autograd/ops.h"
#include "models/hf/hf_names.h"
#include "tests/testing/compare.h"

namespace tessera::vit {
namespace {

using nlohmann::json;

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ValueError& e) {
    return e.what();
  }
  return "";
}

TEST_CASE("ViTConfig reads JSON strictly, over a preset", "[vit][config]") {
  ViTConfig c = ViTConfig::from_json(json{{"preset", "vit-tiny"}, {"num_classes", 100}});
  CHECK(c.image_size == 32);
  CHECK(c.patch_size == 4);
  CHECK(c.num_patches() == 64);
  CHECK(c.num_classes == 100);
  CHECK(ViTConfig::from_json(c.to_json()).to_json() == c.to_json());
  CHECK(error_of([] {
          ViTConfig::from_json(json{{"patch", 4}});
        }).find("unknown key 'patch'") != std::string::npos);
  CHECK(error_of([] {
          ViTConfig::from_json(json{{"image_size", 30}, {"patch_size", 4}});
        }).find("divisible") != std::string::npos);
  CHECK(error_of([] { vit_preset("vit-huge"); }).find("vit-base-16") != std::string::npos);
}

TEST_CASE("ViT presets: vit-base-16 has ViTForImageClassification's count", "[vit][presets]") {
  Generator gen(0);
  ViT base(vit_preset("vit-base-16"), gen);
  CHECK(base.num_parameters() == 86567656);  // google/vit-base-patch16-224
  CHECK(base.pos_embed().shape() == Shape{1, 197, 768});
  ViT tiny(vit_preset("vit-tiny"), gen);
  // Patch projection, class token, positions (64 patches + 1), blocks, final norm, classifier.
  CHECK(tiny.num_parameters() == (48 * 128 + 128) + 128 + 65 * 128 +
                                     4 * (12 * 128 * 128 + 13 * 128) + 2 * 128 + (128 * 10 + 10));
  Tensor logits = tiny.forward(randn({2, 3, 32, 32}, {}, &gen));
  CHECK(logits.shape() == Shape{2, 10});
  CHECK(error_of([&] {
          tiny.forward(zeros({2, 3, 28, 28}));
        }).find("(2, 3, 28, 28)") != std::string::npos);
  CHECK(error_of([&] {
          tiny.loss(zeros({2, 3, 32, 32}), zeros({3}, {.dtype = DType::i64}));
        }).find("labels") != std::string::npos);
}

TEST_CASE("ViT's one-stage plan: the serial parameters, stage_forward is the loss",
          "[vit][pipeline]") {
  Generator gen(4);
  ViTConfig c = vit_preset("vit-tiny");
  c.d_model = 32;
  c.n_heads = 2;
  c.n_layers = 2;
  ViT m(c, gen);
  // The list checkpoints number the optimizer state by: named_parameters(), where the model's own
  // cls_token and pos_embed come first though the patch embedding is drawn before them.
  std::vector<std::pair<std::string, Shape>> want;
  for (const auto& [name, p] : m.named_parameters()) want.emplace_back(name, p.shape());
  CHECK(want.front().first == "cls_token");
  CHECK(m.stage().serial_parameters() == want);
  Tensor images = randn({2, 3, 32, 32}, {}, &gen);
  Tensor labels = from_vector<int64_t>({3, 7}, {2});
  autograd::NoGradGuard no_grad;
  testing::require_close(m.stage_forward(0, images, labels), m.loss(images, labels), 0, 0);
  testing::require_close(m.stage_forward(0, images, Tensor()), m.forward(images), 0, 0);
}

Tensor seq(const Shape& shape, double start = 0) {
  return arange(start, start + double(shape_numel(shape)), 1.0, {.dtype = DType::f32})
      .reshape(shape);
}

TEST_CASE("from_hf_vit renames, reshapes the Conv2d and fuses q | k | v", "[hf][vit]") {
  hf::NamedTensors file = {
      {"vit.embeddings.cls_token", seq({1, 1, 4})},
      {"vit.embeddings.patch_embeddings.projection.weight", seq({4, 3, 2, 2})},
      {"vit.encoder.layer.1.attention.attention.query.bias", seq({4}, 0)},
      {"vit.encoder.layer.1.attention.attention.key.bias", seq({4}, 10)},
      {"vit.encoder.layer.1.attention.attention.value.bias", seq({4}, 20)},
      {"vit.encoder.layer.1.layernorm_after.weight", ones({4})},
      {"vit.layernorm.bias", zeros({4})},
      {"vit.pooler.dense.weight", seq({4, 4})},
      {"classifier.weight", seq({3, 4})},
  };
  auto out = hf::from_hf_vit(file);
  std::map<std::string, Tensor> m(out.begin(), out.end());
  CHECK(m.size() == 6);
  CHECK(m.count("cls_token") == 1);
  CHECK(m.count("h.1.ln_2.weight") == 1);
  CHECK(m.count("head.norm.bias") == 1);
  CHECK(m.count("head.head.weight") == 1);
  testing::require_close(m.at("patch_embed.proj.weight"), seq({4, 12}), 0, 0);
  testing::require_close(m.at("h.1.attn.c_attn.bias"),
                         cat({seq({4}, 0), seq({4}, 10), seq({4}, 20)}, 0), 0, 0);
  CHECK(error_of([] {
          hf::from_hf_vit({{"vit.embeddings.patch_embeddings.projection.weight", seq({4, 12})}});
        }).find("(D, C, P, P)") != std::string::npos);
  CHECK(error_of([] {
          hf::from_hf_vit({{"vit.encoder.layer.0.mixer.weight", seq({2})}});
        }).find("vit.encoder.layer.0.mixer.weight") != std::string::npos);
}

}  // namespace
}  // namespace tessera::vit

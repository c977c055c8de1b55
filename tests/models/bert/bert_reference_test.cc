// BERT against the PyTorch reference (gen_bert_fixture.py: Hugging Face's naming and layout,
// float64 from float32-exact weights, a padded row): weights mapped with hf::from_hf_bert (in
// memory and through a safetensors file), then MLM and classification logits, both losses, every
// parameter gradient of their sum and the losses of 20 AdamW steps must match within 1e-4 relative.
#include <catch2/catch.hpp>

#include "autograd/ops.h"
#include "models/bert/bert.h"
#include "models/hf/load_hf.h"
#include "models/io/safetensors.h"
#include "optim/adam.h"
#include "tests/models/gpt/model_fixture.h"
#include "tests/testing/compare.h"

namespace tessera::bert {
namespace {

using testing::require_close;
using testing::require_scalar_close;

constexpr double kRtol = 1e-4;

const testing::ModelFixture& fixture() {
  static const testing::ModelFixture f =
      testing::load_model_fixture("tests/models/bert/fixtures/bert_tiny.json");
  return f;
}

std::shared_ptr<Bert> reference_model(bool checkpoint = false) {
  BertConfig config = BertConfig::from_json(fixture().config);
  config.checkpoint = checkpoint;
  Generator gen(1);
  auto model = std::make_shared<Bert>(config, gen);
  hf::load_mapped(*model, hf::from_hf_bert(fixture().hf_params), {}, true, "fixture");
  return model;
}

struct Out {
  Tensor mlm_logits, class_logits, mlm_loss, class_loss;
};

Out run(Bert& m) {
  const auto& in = fixture().inputs;
  Tensor h = m.forward(in.at("ids"), in.at("token_type_ids"), in.at("attention_mask"));
  return {m.mlm_logits(h), m.classify(h), m.mlm_loss(h, in.at("mlm_labels")),
          m.classification_loss(h, in.at("class_labels"))};
}

TEST_CASE("BERT logits, losses and every parameter gradient match PyTorch", "[bert][reference]") {
  const auto& f = fixture();
  for (bool checkpoint : {false, true}) {
    INFO("activation checkpointing " << checkpoint);
    auto model = reference_model(checkpoint);
    Out o = run(*model);
    require_close(o.mlm_logits, f.outputs.at("mlm_logits"), kRtol, 1e-5);
    require_close(o.class_logits, f.outputs.at("class_logits"), kRtol, 1e-5);
    require_scalar_close(o.mlm_loss.item(), f.losses.at("mlm_loss"), kRtol, 0.0, "MLM loss");
    require_scalar_close(o.class_loss.item(), f.losses.at("classification_loss"), kRtol, 0.0,
                         "classification loss");
    Tensor loss = o.mlm_loss + o.class_loss;
    require_scalar_close(loss.item(), f.loss, kRtol, 0.0, "loss");
    autograd::backward({loss});
    const size_t n =
        testing::require_grads_close(*model, hf::from_hf_bert(f.hf_grads), kRtol, 1e-6);
    // 5 embedding tensors, 12 per block, pooler 2, MLM head 5 (dense 2, norm 2, bias),
    // classifier 2.
    CHECK(n == 5 + 12 * 2 + 2 + 5 + 2);
  }
}

TEST_CASE("BERT: 20 AdamW steps give PyTorch's losses", "[bert][reference][optim]") {
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
    Out o = run(*model);
    Tensor loss = o.mlm_loss + o.class_loss;
    require_scalar_close(loss.item(), f.adamw.losses[step], kRtol, 0.0,
                         "loss before step " + std::to_string(step));
    autograd::backward({loss});
    opt.step();
  }
  CHECK(f.adamw.losses.back() < 0.25 * f.adamw.losses.front());
}

TEST_CASE("BERT weights from a Hugging Face safetensors file", "[bert][reference][hf]") {
  const auto& f = fixture();
  const std::string path = testing::scratch_path("bert_hf.safetensors");
  io::save_safetensors(path, f.hf_params);
  BertConfig config = BertConfig::from_json(f.config);
  Generator gen(2);
  {
    Bert model(config, gen);
    nn::LoadResult r = hf::load_hf_bert(model, path);
    CHECK(r.missing_keys.empty());
    CHECK(r.unexpected_keys.empty());
    autograd::NoGradGuard no_grad;
    Out o = run(model);
    require_close(o.mlm_logits, f.outputs.at("mlm_logits"), kRtol, 1e-5);
    require_close(o.class_logits, f.outputs.at("class_logits"), kRtol, 1e-5);
  }
  {
    // Fine-tuning a fresh 4-label classifier on the encoder: the heads stay as initialised.
    BertConfig four = config;
    four.num_labels = 4;
    Bert model(four, gen);
    Tensor before = model.state_dict().back().second.clone();  // classifier.head.bias
    nn::LoadResult r = hf::load_hf_bert(model, path, {.load_heads = false});
    // pooler, MLM head (its tied decoder weight listed too, though it shares the loaded word
    // embeddings), classifier
    CHECK(r.missing_keys.size() == 2 + 6 + 2);
    testing::require_close(model.state_dict().back().second, before, 0.0, 0.0);
    autograd::NoGradGuard no_grad;
    const auto& in = f.inputs;
    Tensor h = model.forward(in.at("ids"), in.at("token_type_ids"), in.at("attention_mask"));
    CHECK(model.classify(h).shape() == Shape{2, 4});
  }
  {
    // An encoder-only model: the file's heads are reported as unexpected, the encoder loads.
    BertConfig bare = config;
    bare.num_labels = 0;
    bare.mlm_head = false;
    Bert model(bare, gen);
    nn::LoadResult r = hf::load_hf_bert(model, path);
    CHECK(r.unexpected_keys.size() ==
          2 + 6 + 2);  // pooler, MLM head (with the tied decoder), classifier
    CHECK(r.missing_keys.empty());
  }
}

}  // namespace
}  // namespace tessera::bert

// BERT without a reference: strict JSON configs, preset parameter counts, padding masks, head
// errors, and the Hugging Face BERT name mapping on synthetic tensors.
#include "models/bert/bert.h"

#include <catch2/catch.hpp>
#include <functional>
#include <map>

#include "autograd/ops.h"
#include "models/hf/hf_names.h"
#include "tests/testing/compare.h"

namespace tessera::bert {
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

BertConfig small_config() {
  BertConfig c = bert_preset("bert-tiny");
  c.vocab_size = 40;
  c.max_positions = 12;
  c.d_model = 32;
  c.n_heads = 4;
  c.mlp_hidden = 64;
  c.dropout = 0.0;
  c.attn_dropout = 0.0;
  c.num_labels = 2;
  return c;
}

TEST_CASE("BertConfig reads JSON strictly, over a preset", "[bert][config]") {
  BertConfig c = BertConfig::from_json(json{{"preset", "bert-tiny"}, {"num_labels", 3}});
  CHECK(c.n_layers == 2);
  CHECK(c.n_heads == 2);
  CHECK(c.d_model == 128);
  CHECK(c.mlp_hidden == 512);
  CHECK(c.num_labels == 3);
  CHECK(BertConfig::from_json(c.to_json()).to_json() == c.to_json());
  CHECK(error_of([] {
          BertConfig::from_json(json{{"hidden_size", 3}});
        }).find("unknown key 'hidden_size'") != std::string::npos);
  CHECK(error_of([] {
          BertConfig::from_json(json{{"mlm_head", 1}});
        }).find("'mlm_head'") != std::string::npos);
  CHECK(error_of([] { bert_preset("bert-large"); }).find("bert-base") != std::string::npos);
}

TEST_CASE("bert-base has BertForMaskedLM's parameter count", "[bert][presets]") {
  BertConfig c = bert_preset("bert-base");
  Generator gen(0);
  Bert m(c, gen);
  // Hugging Face's BertForMaskedLM (bert-base-uncased): encoder without pooler, MLM head.
  CHECK(m.num_parameters() == 109514298);
  int64_t encoder = 0;
  for (auto& [name, t] : m.named_parameters())
    if (name.rfind("mlm.", 0) != 0) encoder += t.numel();
  // BertModel's 109,482,240 less its pooler (768 * 768 + 768).
  CHECK(encoder == 109482240 - 590592);
}

TEST_CASE("BERT padding: padded tokens change nothing at real positions", "[bert][mask]") {
  Generator gen(1);
  Bert m(small_config(), gen);
  Tensor ids = from_vector<int64_t>({5, 6, 7, 8, 9, 10, 11, 12, 13, 14}, {2, 5});
  Tensor other = from_vector<int64_t>({5, 6, 7, 8, 9, 10, 11, 12, 30, 31}, {2, 5});
  Tensor mask = from_vector<int64_t>({1, 1, 1, 1, 1, 1, 1, 1, 0, 0}, {2, 5});  // integer 0/1
  autograd::NoGradGuard no_grad;
  Tensor a = m.forward(ids, Tensor(), mask), b = m.forward(other, Tensor(), mask);
  CHECK(a.shape() == Shape{2, 5, 32});
  testing::require_close(a.narrow(1, 0, 3), b.narrow(1, 0, 3), 1e-6, 1e-6);
  testing::require_close(m.classify(a), m.classify(b), 1e-6, 1e-6);
  // Without the mask the padded ids do leak into the real positions.
  Tensor c = m.forward(ids), d = m.forward(other);
  CHECK(testing::to_doubles(c.narrow(1, 0, 3)) != testing::to_doubles(d.narrow(1, 0, 3)));
  // Token types: omitted means all zeros.
  testing::require_close(m.forward(ids, zeros({2, 5}, {.dtype = DType::i64})), c, 1e-6, 1e-6);
}

TEST_CASE("BERT's one-stage plan: the serial parameters, stage_forward is the masked loss",
          "[bert][pipeline]") {
  Generator gen(3);
  Bert m(small_config(), gen);
  // The list checkpoints number the optimizer state by: named_parameters() (the tied MLM decoder
  // once, as the word embeddings).
  std::vector<std::pair<std::string, Shape>> want;
  for (const auto& [name, p] : m.named_parameters()) want.emplace_back(name, p.shape());
  CHECK(m.stage().serial_parameters() == want);
  CHECK_FALSE(m.stage().pipelined());
  Tensor ids = from_vector<int64_t>({5, 6, 7, 8, 9, 10, 11, 12, 13, 14}, {2, 5});
  Tensor mask = from_vector<int64_t>({1, 1, 1, 1, 1, 1, 1, 1, 0, 0}, {2, 5});
  Tensor labels = from_vector<int64_t>({-100, 7, -100, 8, -100, 10, -100, 12, -100, -100}, {2, 5});
  autograd::NoGradGuard no_grad;
  testing::require_close(m.stage_forward(0, ids, mask, labels),
                         m.mlm_loss(m.forward(ids, Tensor(), mask), labels), 0, 0);
  testing::require_close(m.stage_forward(0, ids, mask, Tensor()),
                         m.mlm_logits(m.forward(ids, Tensor(), mask)), 0, 0);
}

TEST_CASE("BERT heads and inputs are checked", "[bert]") {
  Generator gen(2);
  BertConfig c = small_config();
  c.num_labels = 0;
  c.mlm_head = false;
  Bert m(c, gen);
  Tensor ids = zeros({2, 5}, {.dtype = DType::i64});
  Tensor h = m.forward(ids);
  CHECK(error_of([&] { m.classify(h); }).find("num_labels") != std::string::npos);
  CHECK(error_of([&] { m.mlm_logits(h); }).find("mlm_head") != std::string::npos);
  CHECK(error_of([&] {
          m.forward(zeros({2, 13}, {.dtype = DType::i64}));
        }).find("T <= 12") != std::string::npos);
  CHECK(error_of([&] {
          m.forward(ids, Tensor(), ones({2, 4}, {.dtype = DType::b8}));
        }).find("attention_mask") != std::string::npos);
}

Tensor seq(const Shape& shape, double start = 0) {
  return arange(start, start + double(shape_numel(shape)), 1.0, {.dtype = DType::f32})
      .reshape(shape);
}

TEST_CASE("from_hf_bert renames, fuses q | k | v and ties the MLM decoder", "[hf][bert]") {
  hf::NamedTensors file = {
      {"bert.embeddings.word_embeddings.weight", seq({6, 2})},
      {"bert.embeddings.LayerNorm.gamma", ones({2})},  // TensorFlow-era names
      {"bert.embeddings.position_ids", zeros({1, 4}, {.dtype = DType::i64})},
      {"bert.encoder.layer.0.attention.self.query.weight", seq({2, 2}, 0)},
      {"bert.encoder.layer.0.attention.self.key.weight", seq({2, 2}, 10)},
      {"bert.encoder.layer.0.attention.self.value.weight", seq({2, 2}, 20)},
      {"bert.encoder.layer.0.attention.output.LayerNorm.beta", zeros({2})},
      {"bert.encoder.layer.0.output.dense.weight", seq({2, 8})},
      {"cls.predictions.bias", seq({6})},
      {"cls.predictions.transform.dense.weight", seq({2, 2})},
      {"cls.seq_relationship.weight", seq({2, 2})},
      {"classifier.bias", seq({3})},
  };
  auto out = hf::from_hf_bert(file);
  std::map<std::string, Tensor> m(out.begin(), out.end());
  CHECK(m.size() == 9);
  CHECK(m.count("embeddings.layer_norm.weight") == 1);
  CHECK(m.count("h.0.ln_1.bias") == 1);
  CHECK(m.count("h.0.mlp.c_proj.weight") == 1);
  CHECK(m.count("mlm.dense.weight") == 1);
  CHECK(m.count("classifier.head.bias") == 1);
  testing::require_close(m.at("h.0.attn.c_attn.weight"),
                         cat({seq({2, 2}, 0), seq({2, 2}, 10), seq({2, 2}, 20)}, 0), 0, 0);
  testing::require_close(m.at("mlm.decoder.weight"), seq({6, 2}), 0, 0);
  testing::require_close(m.at("mlm.decoder.bias"), seq({6}), 0, 0);

  file.erase(file.begin() + 5);  // no value.weight in layer 0
  std::string msg = error_of([&] { hf::from_hf_bert(file); });
  CHECK(msg.find("value.weight in layer 0") != std::string::npos);
  msg = error_of([] { hf::from_hf_bert({{"bert.encoder.layer.0.crossattention.x", seq({2})}}); });
  CHECK(msg.find("bert.encoder.layer.0.crossattention.x") != std::string::npos);
}

}  // namespace
}  // namespace tessera::bert

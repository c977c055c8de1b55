// Export of BERT and ViT in Hugging Face's layout: the reference fixtures (Hugging Face names and
// layouts, from gen_bert_fixture.py / gen_vit_fixture.py) loaded into our models and exported give
// back every fixture tensor exactly; the exported directory's config.json reads back as the model's
// config and its weights load into a fresh model whose logits are bit-identical.
#include "models/hf/export_hf.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <map>

#include "autograd/ops.h"
#include "models/bert/bert.h"
#include "models/hf/load_hf.h"
#include "models/io/atomic_file.h"
#include "models/vit/vit.h"
#include "tests/models/gpt/model_fixture.h"
#include "tests/testing/compare.h"

namespace tessera::hf {
namespace {

using testing::require_close;

// Each of the fixture's tensors (but the buffers in `skip`) equals the export's of that name, and
// the export holds nothing more.
void require_export_equals(const NamedTensors& exported, const NamedTensors& fixture,
                           const std::vector<std::string>& skip) {
  std::map<std::string, Tensor> by_name(exported.begin(), exported.end());
  REQUIRE(by_name.size() == exported.size());  // no name twice
  size_t compared = 0;
  for (const auto& [name, t] : fixture) {
    if (std::find(skip.begin(), skip.end(), name) != skip.end()) continue;
    INFO(name);
    REQUIRE(by_name.count(name) == 1);
    REQUIRE(by_name[name].shape() == t.shape());
    require_close(by_name[name], t.to(by_name[name].dtype()), 0.0, 0.0);
    ++compared;
  }
  CHECK(compared == exported.size());
}

nlohmann::json read_config(const std::string& dir) {
  return nlohmann::json::parse(io::read_file(dir + "/config.json", "test"));
}

std::string fresh_dir(const std::string& name) {
  const std::string dir = testing::scratch_path(name);
  std::filesystem::remove_all(dir);
  return dir;
}

TEST_CASE("BERT export gives back Hugging Face's tensors and loads bit for bit", "[hf][bert]") {
  const testing::ModelFixture f =
      testing::load_model_fixture("tests/models/bert/fixtures/bert_tiny.json");
  const bert::BertConfig config = bert::BertConfig::from_json(f.config);
  Generator gen(1);
  bert::Bert model(config, gen);
  load_mapped(model, from_hf_bert(f.hf_params), {}, true, "fixture");
  // The fixture is BertForMaskedLM + classifier names; position_ids is a buffer we do not keep and
  // the tied decoder weight is left out, as in Hugging Face's own files.
  require_export_equals(to_hf_bert(model.state_dict()), f.hf_params,
                        {"bert.embeddings.position_ids"});

  const std::string dir = fresh_dir("bert_export");
  export_hf_bert(model.state_dict(), config, dir);
  const nlohmann::json hf = read_config(dir);
  CHECK(hf["model_type"] == "bert");
  CHECK(hf["architectures"] ==
        nlohmann::json({"BertForMaskedLM", "BertForSequenceClassification"}));
  CHECK(hf["hidden_size"] == config.d_model);
  CHECK(hf["intermediate_size"] == config.mlp_hidden);
  CHECK(hf["id2label"].size() == size_t(config.num_labels));
  CHECK(bert_config_from_hf(hf, "config.json").to_json() == config.to_json());

  bert::Bert back(bert_config_from_hf(hf, "config.json"), gen);
  nn::LoadResult r = load_hf_bert(back, dir + "/model.safetensors");
  CHECK(r.missing_keys.empty());
  CHECK(r.unexpected_keys.empty());
  autograd::NoGradGuard no_grad;
  const auto& in = f.inputs;
  Tensor h0 = model.forward(in.at("ids"), in.at("token_type_ids"), in.at("attention_mask"));
  Tensor h1 = back.forward(in.at("ids"), in.at("token_type_ids"), in.at("attention_mask"));
  require_close(back.mlm_logits(h1), model.mlm_logits(h0), 0.0, 0.0);
  require_close(back.classify(h1), model.classify(h0), 0.0, 0.0);
  CHECK_THROWS_WITH(export_hf_bert(model.state_dict(), config, dir),
                    Catch::Contains("expected a new output directory"));

  // A bare encoder is a BertModel: no "bert." prefix, no heads.
  bert::BertConfig bare = config;
  bare.mlm_head = false;
  bare.num_labels = 0;
  bert::Bert encoder(bare, gen);
  for (const auto& [name, t] : to_hf_bert(encoder.state_dict())) {
    INFO(name);
    CHECK((name.rfind("embeddings.", 0) == 0 || name.rfind("encoder.layer.", 0) == 0));
  }
  CHECK(bert_hf_config(bare)["architectures"] == nlohmann::json({"BertModel"}));
  // What our BERT cannot be built from.
  CHECK_THROWS_WITH(bert_config_from_hf({{"model_type", "vit"}}, "x/config.json"),
                    Catch::Contains("x/config.json: expected a bert config.json"));
  CHECK_THROWS_WITH(
      bert_config_from_hf({{"model_type", "bert"}, {"hidden_act", "relu"}}, "x/config.json"),
      Catch::Contains("expected the exact GELU"));
  CHECK_THROWS_WITH(
      bert_config_from_hf({{"model_type", "bert"}, {"position_embedding_type", "relative_key"}},
                          "x/config.json"),
      Catch::Contains("expected absolute position embeddings"));
}

TEST_CASE("ViT export gives back Hugging Face's tensors and loads bit for bit", "[hf][vit]") {
  const testing::ModelFixture f =
      testing::load_model_fixture("tests/models/vit/fixtures/vit_tiny.json");
  const vit::ViTConfig config = vit::ViTConfig::from_json(f.config);
  Generator gen(1);
  vit::ViT model(config, gen);
  load_mapped(model, from_hf_vit(f.hf_params), {}, true, "fixture");
  // ViTForImageClassification's names, the Conv2d patch projection (D, C, P, P) restored.
  require_export_equals(to_hf_vit(model.state_dict(), config), f.hf_params, {});

  const std::string dir = fresh_dir("vit_export");
  export_hf_vit(model.state_dict(), config, dir);
  const nlohmann::json hf = read_config(dir);
  CHECK(hf["model_type"] == "vit");
  CHECK(hf["architectures"] == nlohmann::json({"ViTForImageClassification"}));
  CHECK(hf["num_channels"] == config.in_channels);
  CHECK(hf["id2label"].size() == size_t(config.num_classes));
  CHECK(vit_config_from_hf(hf, "config.json").to_json() == config.to_json());

  vit::ViT back(vit_config_from_hf(hf, "config.json"), gen);
  nn::LoadResult r = load_hf_vit(back, dir + "/model.safetensors");
  CHECK(r.missing_keys.empty());
  CHECK(r.unexpected_keys.empty());
  autograd::NoGradGuard no_grad;
  require_close(back.forward(f.inputs.at("images")), model.forward(f.inputs.at("images")), 0.0,
                0.0);
  CHECK_THROWS_WITH(
      vit_config_from_hf({{"model_type", "vit"}, {"qkv_bias", false}}, "x/config.json"),
      Catch::Contains("expected query / key / value biases"));
  CHECK_THROWS_WITH(vit_config_from_hf({{"model_type", "gpt2"}}, "x/config.json"),
                    Catch::Contains("x/config.json: expected a vit config.json"));
}

}  // namespace
}  // namespace tessera::hf

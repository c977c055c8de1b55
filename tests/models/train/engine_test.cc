// The engine API for a user's model (models/train/engine.h), single process: a recipe trains,
// step by step or with fit(), evaluates, checkpoints and resumes like the bundled trainers; the
// bundled LM data works as a BatchSource; recipe and configuration errors are named. The user's
// model under every parallel layout: tools/examples/parallel_block_lm_test.sh.
#include "models/train/engine.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>

#include "autograd/ops.h"
#include "core/error.h"
#include "core/factory.h"
#include "models/nn/factory.h"
#include "tests/models/train/train_test_util.h"

using namespace tessera;
using namespace tessera::train;
using nlohmann::json;

namespace {

// y = x . (1, -2, 3, 0.5) + 1: rows drawn from a generator keyed by the row's index, so the stream
// resumes exactly from its position.
class RegressionData : public BatchSource {
 public:
  explicit RegressionData(uint64_t seed) : seed_(seed) {}
  Batch next(int64_t rows) override {
    Generator gen(seed_ * 1000003 + uint64_t(index_++));
    Tensor x = randn({rows, 4}, {}, &gen);
    Tensor w = from_vector<float>({1, -2, 3, 0.5}, {4, 1});
    return {.input = x, .target = add(matmul(x, w), 1.0)};
  }
  json position() const override { return {{"index", index_}}; }
  void set_position(const json& p) override { index_ = p.at("index").get<int64_t>(); }
  std::string describe() const override { return "regression rows"; }

 private:
  uint64_t seed_;
  int64_t index_ = 0;
};

class Regressor : public nn::Module {
 public:
  Regressor(const nn::BuildContext& ctx, int64_t hidden) {
    fc_ = register_module("fc", nn::make_linear({.in_features = 4, .out_features = hidden}, ctx));
    out_ = register_module("out", nn::make_linear({.in_features = hidden, .out_features = 1}, ctx));
  }
  std::string type_name() const override { return "Regressor"; }
  Tensor loss(const Batch& b) {
    return mean(square(sub(out_->forward(fc_->forward(b.input)), b.target)));
  }

 private:
  std::shared_ptr<nn::Linear> fc_, out_;
};

// Same shape and ids.
bool same_ids(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  for (int64_t i = 0; i < a.numel(); ++i)
    if (a.data<int64_t>()[i] != b.data<int64_t>()[i]) return false;
  return true;
}

ModelRecipe regression_recipe() {
  ModelRecipe r;
  r.name = "regressor";
  r.build = [](const nn::BuildContext& ctx, const json& options) {
    return std::make_shared<Regressor>(ctx, options.value("hidden", int64_t(8)));
  };
  r.loss = [](nn::Module& m, const Batch& b) { return static_cast<Regressor&>(m).loss(b); };
  r.train_data = [](const DataShard& s) { return std::make_unique<RegressionData>(1 + s.rank); };
  r.val_data = [](const DataShard&) { return std::make_unique<RegressionData>(99); };
  return r;
}

json regression_config(const std::string& checkpoint_dir = "") {
  return {{"model", {{"type", "custom"}, {"hidden", 16}}},
          {"optimizer", {{"type", "adamw"}, {"lr", 3e-2}}},
          {"train", {{"steps", 30}, {"batch_size", 16}, {"threads", 1}, {"eval_batches", 2}}},
          {"checkpoint", {{"dir", checkpoint_dir}}},
          {"logging", {{"progress", false}}}};
}

}  // namespace

TEST_CASE("the engine trains a user's model and reports its held-out loss") {
  Engine engine(TrainConfig::from_json(regression_config()), regression_recipe(), nullptr);
  const double before = engine.evaluate().metrics.at("val_loss").get<double>();
  const TrainSummary s = engine.fit();
  REQUIRE(s.losses.size() == 30);
  CHECK(engine.step() == 30);
  CHECK(train::testing::mean_tail(s.losses, 5) < 0.2 * s.losses.front());
  const double after = s.last_eval.at("val_loss").get<double>();
  CHECK(after < 0.2 * before);
  CHECK(engine.evaluate().metrics.at("val_loss").get<double>() == after);  // same batches
  CHECK(engine.model().named_parameters().size() == 4);
}

TEST_CASE("train_step gives fit's losses, and a saved engine resumes exactly") {
  const std::vector<double> uninterrupted =
      Engine(TrainConfig::from_json(regression_config()), regression_recipe(), nullptr)
          .fit()
          .losses;
  const tessera::testing::TempDir dir("engine_resume");
  const std::string root = (dir.path() / "ck").string();
  std::vector<double> losses;
  {
    Engine first(TrainConfig::from_json(regression_config(root)), regression_recipe(), nullptr);
    for (int i = 0; i < 12; ++i) losses.push_back(first.train_step());
    first.save();
  }
  Engine second(TrainConfig::from_json(regression_config(root)), regression_recipe(), nullptr);
  CHECK(second.step() == 12);
  const TrainSummary rest = second.fit();
  CHECK(rest.start_step == 12);
  losses.insert(losses.end(), rest.losses.begin(), rest.losses.end());
  REQUIRE(losses.size() == uninterrupted.size());
  for (size_t i = 0; i < losses.size(); ++i) CHECK(losses[i] == uninterrupted[i]);  // bit-identical
}

TEST_CASE("the bundled LM data serves a custom model as a BatchSource") {
  json j = regression_config();
  j["train"]["seq_len"] = 16;
  j["data"] = {{"builtin_tokens", 4096}, {"builtin_val_tokens", 1024}};
  const TrainConfig c = TrainConfig::from_json(j);
  std::unique_ptr<BatchSource> train = lm_batches(c, {.rank = 0, .ranks = 2});
  std::unique_ptr<BatchSource> other = lm_batches(c, {.rank = 1, .ranks = 2});
  const Batch a = train->next(3), b = other->next(3);
  REQUIRE(a.input.shape() == Shape{3, 16});
  REQUIRE(a.target.shape() == Shape{3, 16});
  // Targets are the inputs shifted by one token.
  for (int64_t t = 0; t + 1 < 16; ++t)
    CHECK(a.target.data<int64_t>()[t] == a.input.data<int64_t>()[t + 1]);
  CHECK_FALSE(same_ids(a.input, b.input));  // each data rank reads its own windows
  const json at = train->position();
  const Batch next = train->next(3);
  train->set_position(at);
  CHECK(same_ids(train->next(3).input, next.input));
  CHECK(lm_batches(c, {}, /*held_out=*/true) != nullptr);
  j["train"]["seq_len"] = 0;
  CHECK_THROWS_WITH(lm_batches(TrainConfig::from_json(j), {}),
                    Catch::Contains("needs a sequence length"));
}

TEST_CASE("recipe and configuration mistakes are named") {
  ModelRecipe no_build = regression_recipe();
  no_build.build = nullptr;
  CHECK_THROWS_WITH(Engine(TrainConfig::from_json(regression_config()), no_build, nullptr),
                    Catch::Contains("model recipe 'regressor': expected its build and train_data"));
  ModelRecipe no_loss = regression_recipe();
  no_loss.loss = nullptr;
  CHECK_THROWS_WITH(Engine(TrainConfig::from_json(regression_config()), no_loss, nullptr),
                    Catch::Contains("expected its loss function"));
  // `tessera train` has no recipe for a custom model.
  CHECK_THROWS_WITH(run_training(TrainConfig::from_json(regression_config()), nullptr),
                    Catch::Contains("model.type custom is a model given through the C++ API"));
  // The custom model's keys reach its recipe untouched.
  const TrainConfig c = TrainConfig::from_json(regression_config());
  CHECK(c.kind == ModelKind::custom);
  CHECK(c.custom == json{{"hidden", 16}});
}

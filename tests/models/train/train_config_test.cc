// The training configuration: defaults, strict keys with full paths, value checks, overrides,
// and file errors.
#include "models/train/train_config.h"

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>

#include "core/error.h"
#include "tests/testing/temp_dir.h"

using namespace tessera;
using namespace tessera::train;
using nlohmann::json;
using tessera::testing::TempDir;

namespace {

json base() {
  return json::parse(R"({"model": {"type": "gpt", "preset": "gpt-tiny"},
                          "train": {"steps": 10, "batch_size": 4}})");
}

std::string error_of(const json& j) {
  try {
    TrainConfig::from_json(j);
  } catch (const ValueError& e) {
    return e.what();
  }
  return "no error";
}

std::string write_temp(const TempDir& tmp, const std::string& name, const std::string& text) {
  const std::string path = tmp.file(name);
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST_CASE("a minimal config reads with defaults") {
  TrainConfig c = TrainConfig::from_json(base());
  CHECK(c.kind == ModelKind::gpt);
  CHECK(c.gpt.n_layers == 2);
  CHECK(c.gpt.d_model == 128);
  CHECK(c.train.steps == 10);
  CHECK(c.train.batch_size == 4);
  CHECK(c.seq_len() == 64);
  CHECK(c.precision.dtype == "f32");
  CHECK(c.optimizer["type"] == "adamw");
  CHECK(c.schedule.total_steps == 10);   // defaults to train.steps
  CHECK(c.schedule.lr == Approx(1e-3));  // AdamW's default lr
  CHECK(c.parallel.data == 1);
  CHECK_FALSE(c.data_size_given);
  CHECK(c.data.path.empty());
}

TEST_CASE("every section reads its keys") {
  json j = base();
  j["model"]["n_layers"] = 3;
  j["parallel"] = {{"data", 2}};
  j["precision"] = {{"dtype", "f16"},
                    {"loss_scale", {{"init_scale", 1024.0}, {"growth_interval", 5}}}};
  j["optimizer"] = {{"type", "sgd"}, {"lr", 0.1}, {"momentum", 0.9}};
  j["schedule"] = {{"type", "linear"}, {"warmup_steps", 2}, {"total_steps", 20}};
  const TempDir tmp;
  j["checkpoint"] = {{"dir", tmp.file("ckpt")}, {"every", 5}};
  j["logging"] = {{"metrics", tmp.file("m.jsonl")}, {"log_every", 3}};
  TrainConfig c = TrainConfig::from_json(j);
  CHECK(c.gpt.n_layers == 3);
  CHECK(c.parallel.data == 2);
  CHECK(c.data_size_given);
  CHECK(c.precision.loss_scale.init_scale == 1024.0);
  CHECK(c.precision.loss_scale.growth_interval == 5);
  CHECK(c.schedule.lr == Approx(0.1));
  CHECK(c.schedule.total_steps == 20);
  CHECK(c.checkpoint.dir == tmp.file("ckpt"));
  CHECK(c.checkpoint.every == 5);
  CHECK(c.logging.metrics == tmp.file("m.jsonl"));
  CHECK(c.logging.log_every == 3);
  j["model"] = {{"type", "vit"}, {"preset", "vit-tiny"}};
  CHECK(TrainConfig::from_json(j).vit.image_size == 32);
  j["model"] = {
      {"type", "bert"}, {"preset", "bert-tiny"}, {"vocab_size", 260}, {"max_positions", 64}};
  CHECK(TrainConfig::from_json(j).bert.vocab_size == 260);
}

TEST_CASE("unknown keys are errors naming the full key path") {
  json j = base();
  j["train"]["stpes"] = 5;
  CHECK_THAT(error_of(j), Catch::Contains("unknown key 'train.stpes'") && Catch::Contains("steps"));
  j = base();
  j["trian"] = json::object();
  CHECK_THAT(error_of(j), Catch::Contains("unknown key 'trian'"));
  j = base();
  j["model"]["d_modle"] = 64;
  CHECK_THAT(error_of(j),
             Catch::Contains("unknown key 'model.d_modle'") && Catch::Contains("d_model"));
  j = base();
  j["optimizer"] = {{"type", "adamw"}, {"momentum", 0.9}};
  CHECK_THAT(error_of(j), Catch::Contains("unknown key 'optimizer.momentum'"));
  j = base();
  j["schedule"] = {{"warmup", 3}};
  CHECK_THAT(error_of(j), Catch::Contains("unknown key 'schedule.warmup'"));
  j = base();
  j["parallel"] = {{"tensor", {{"size", 1}, {"modes", "2d"}}}};
  CHECK_THAT(error_of(j), Catch::Contains("unknown key 'parallel.tensor.modes'"));
  j = base();
  j["precision"] = {{"loss_scale", {{"init", 2.0}}}};
  CHECK_THAT(error_of(j), Catch::Contains("unknown key 'precision.loss_scale.init'"));
  j = base();
  j["data"] = {{"pth", "x.tok"}};
  CHECK_THAT(error_of(j), Catch::Contains("unknown key 'data.pth'"));
}

TEST_CASE("bad values name the key and the value") {
  json j = base();
  j["train"]["steps"] = 0;
  CHECK_THAT(error_of(j),
             Catch::Contains("train.steps") && Catch::Contains(">= 1") && Catch::Contains("got 0"));
  j = base();
  j["train"]["batch_size"] = "eight";
  CHECK_THAT(error_of(j), Catch::Contains("train.batch_size: expected an integer, got \"eight\""));
  j = base();
  j["precision"] = {{"dtype", "f8"}};
  CHECK_THAT(error_of(j),
             Catch::Contains("precision.dtype: expected one of f32, bf16, f16, got 'f8'"));
  j = base();
  j["model"]["n_heads"] = 3;
  CHECK_THAT(error_of(j), Catch::Contains("model") && Catch::Contains("divisible"));
  j = base();
  j["model"]["type"] = "llama";
  CHECK_THAT(error_of(j), Catch::Contains("model.type: expected one of gpt, bert, vit"));
  j = base();
  j["optimizer"] = {{"type", "adamw"}, {"lr", -1.0}};
  CHECK_THAT(error_of(j), Catch::Contains("optimizer"));
  j = base();
  j["train"]["seq_len"] = 1000;
  CHECK_THAT(error_of(j),
             Catch::Contains("train.seq_len: expected at most the model's context 64"));
  j = base();
  j["parallel"] = {{"tensor", {{"size", 3}, {"mode", "2d"}}}};
  CHECK_THAT(error_of(j), Catch::Contains("parallel"));
  j = base();
  j.erase("model");
  CHECK_THAT(error_of(j), Catch::Contains("model: missing"));
}

TEST_CASE("--set overrides edit the JSON with type checking by the schema") {
  json j = base();
  apply_override(j, "train.steps=50");
  CHECK(j["train"]["steps"] == 50);
  apply_override(j, "optimizer.lr=3e-4");
  CHECK(j["optimizer"]["lr"].get<double>() == Approx(3e-4));
  apply_override(j, "model.preset=gpt-mini");  // not JSON: the text itself
  CHECK(j["model"]["preset"] == "gpt-mini");
  apply_override(j, "optimizer.betas=[0.9, 0.99]");
  CHECK(j["optimizer"]["betas"][1].get<double>() == Approx(0.99));
  apply_override(j, "checkpoint.dir=123");  // a new key: parsed as JSON, then type-checked
  CHECK(j["checkpoint"]["dir"] == 123);
  CHECK_THAT(error_of(j), Catch::Contains("checkpoint.dir: expected a string, got 123"));
  apply_override(j, "checkpoint.dir=\"123\"");
  CHECK(j["checkpoint"]["dir"] == "123");
  j["data"]["path"] = "a.tok";
  apply_override(j, "data.path=123");  // an existing string stays a string
  CHECK(j["data"]["path"] == "123");
  CHECK(TrainConfig::from_json(j).gpt.n_layers == 4);  // gpt-mini
  apply_override(j, "train.steps=many");
  CHECK_THAT(error_of(j), Catch::Contains("train.steps: expected an integer, got \"many\""));
  CHECK_THROWS_WITH(apply_override(j, "train.steps.x=1"),
                    Catch::Contains("'train.steps' is not an object"));
  CHECK_THROWS_WITH(apply_override(j, "train.steps"), Catch::Contains("key=value"));
  CHECK_THROWS_WITH(apply_override(j, "a..b=1"), Catch::Contains("key path"));
}

TEST_CASE("config files: parse errors give the position, the file is named") {
  const TempDir tmp;
  const std::string good = write_temp(tmp, "good.json", base().dump());
  TrainConfig c = load_train_config(good, {"train.steps=7"});
  CHECK(c.train.steps == 7);
  CHECK(c.source["train"]["steps"] == 7);

  const std::string bad = write_temp(
      tmp, "bad.json", "{\n  \"model\": {\"type\": \"gpt\"},\n  \"train\": {\"steps\": 5,}\n}\n");
  CHECK_THROWS_WITH(load_train_config(bad, {}), Catch::Contains(bad) &&
                                                    Catch::Contains("invalid JSON") &&
                                                    Catch::Contains("line 3"));
  const std::string missing = tmp.file("no/such/config.json");
  CHECK_THROWS_WITH(load_train_config(missing, {}), Catch::Contains(missing + ": cannot open"));
  CHECK_THROWS_WITH(load_train_config(good, {"train.stpes=1"}),
                    Catch::Contains(good + ": unknown key 'train.stpes'"));
}

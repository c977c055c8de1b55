// The ViT trainer on image data: the data section's keys and their errors, data checked against
// the model, a short run on a generated image folder that learns its classes, resume, and CIFAR-10.
#include "models/train/image_data.h"

#include <catch2/catch.hpp>
#include <filesystem>

#include "core/error.h"
#include "models/train/trainer.h"
#include "tests/models/data/image_test_util.h"
#include "tests/models/train/train_test_util.h"

using namespace tessera;
using namespace tessera::train;
using namespace tessera::train::testing;
using nlohmann::json;
namespace dt = tessera::data::testing;

namespace {

json tiny_vit(int64_t image_size, int64_t classes) {
  json j = json::parse(R"({
    "model": {"type": "vit", "patch_size": 4, "n_layers": 1, "n_heads": 2, "d_model": 32},
    "optimizer": {"type": "adamw", "lr": 3e-3},
    "train": {"steps": 40, "batch_size": 16, "threads": 2, "eval_batches": 4},
    "logging": {"progress": false}
  })");
  j["model"]["image_size"] = image_size;
  j["model"]["num_classes"] = classes;
  return j;
}

std::string config_error(const json& j) {
  try {
    TrainConfig::from_json(j);
  } catch (const ValueError& e) {
    return e.what();
  }
  return "no error";
}

// Train and val folders of 4 stripe classes (20x20 PNGs, resized to the model's 16x16).
std::string stripes_dirs() {
  static const std::string root = [] {
    const std::string r = fresh_dir("stripes");
    dt::write_stripes_folder(r + "/train", 4, 32, 20, 1);
    dt::write_stripes_folder(r + "/val", 4, 12, 20, 2);
    return r;
  }();
  return root;
}

}  // namespace

TEST_CASE("the data section's image keys are checked") {
  json j = tiny_vit(16, 4);
  j["data"] = {{"type", "imagenet"}};
  CHECK_THAT(config_error(j), Catch::Contains("data.type: expected one of cifar10, image_folder"));
  j["data"] = {{"type", "cifar10"}};
  CHECK_THAT(config_error(j), Catch::Contains("data.path: data.type cifar10 needs the directory"));
  j["data"] = {{"type", "cifar10"}, {"path", "/d"}, {"val", "/v"}};
  CHECK_THAT(config_error(j), Catch::Contains("remove data.val_path, data.train, data.val"));
  j["data"] = {{"type", "image_folder"}};
  CHECK_THAT(config_error(j), Catch::Contains("data.train: data.type image_folder needs"));
  j["data"] = {{"type", "image_folder"}, {"train", "/t"}, {"path", "/p"}};
  CHECK_THAT(config_error(j), Catch::Contains("reads data.train and data.val instead"));
  j["data"] = {{"crop_padding", 4}};
  CHECK_THAT(config_error(j), Catch::Contains("only image data"));
  j["data"] = {{"train", "/t"}};
  CHECK_THAT(config_error(j),
             Catch::Contains("data.train / data.val: only data.type image_folder"));
  j["data"] = {{"type", "image_folder"}, {"train", "/t"}, {"augment", true}};
  CHECK_THAT(config_error(j), Catch::Contains("unknown key 'data.augment'"));
  j["data"] = {{"type", "image_folder"}, {"train", "/t"}, {"crop_padding", -1}};
  CHECK_THAT(config_error(j), Catch::Contains("data.crop_padding: expected a value in [0, 64]"));
  j["data"] = {{"type", "image_folder"}, {"train", "/t"}, {"val", "/v"},
               {"crop_padding", 4},      {"hflip", true}, {"skip_bad_images", true},
               {"shuffle", false}};
  CHECK(config_error(j) == "no error");
  json g = tiny_gpt();
  g["data"] = {{"type", "cifar10"}, {"path", "/d"}};
  CHECK_THAT(config_error(g), Catch::Contains("data.type: cifar10 is image data for the ViT "
                                              "trainer, got model.type gpt"));
}

TEST_CASE("image data that does not fit the model is a clear error") {
  const std::string root = stripes_dirs();
  json j = tiny_vit(16, 5);
  j["data"] = {{"type", "image_folder"}, {"train", root + "/train"}};
  CHECK_THAT(error_of(j), Catch::Contains(root + "/train has 4 classes (class_0, class_1, class_2, "
                                                 "class_3); expected model.num_classes 5"));
  j = tiny_vit(16, 4);
  j["model"]["in_channels"] = 1;
  j["data"] = {{"type", "image_folder"}, {"train", root + "/train"}};
  CHECK_THAT(error_of(j), Catch::Contains("expected model.in_channels 3, got 1"));
  j = tiny_vit(16, 10);
  j["data"] = {{"type", "cifar10"}, {"path", root}};
  CHECK_THAT(error_of(j), Catch::Contains("expected model.image_size 32 and model.in_channels 3, "
                                          "got 16 and 3"));
  j = tiny_vit(32, 4);
  j["data"] = {{"type", "cifar10"}, {"path", root}};
  CHECK_THAT(error_of(j), Catch::Contains("expected model.num_classes 10, got 4"));
  j = tiny_vit(32, 10);
  j["data"] = {{"type", "cifar10"}, {"path", root}};
  CHECK_THAT(error_of(j), Catch::Contains("missing " + root + "/data_batch_1.bin"));
  j = tiny_vit(16, 4);
  j["data"] = {{"type", "image_folder"}, {"train", root + "/train"}, {"val", root + "/nope"}};
  CHECK_THAT(error_of(j), Catch::Contains(root + "/nope") && Catch::Contains("does not exist"));
}

TEST_CASE("a tiny ViT learns a generated image folder well above chance") {
  const std::string root = stripes_dirs();
  json j = tiny_vit(16, 4);
  j["data"] = {{"type", "image_folder"},
               {"train", root + "/train"},
               {"val", root + "/val"},
               {"crop_padding", 2},
               {"hflip", true}};
  TrainSummary s = train_json(j);
  REQUIRE(s.losses.size() == 40);
  CHECK(mean_tail(s.losses, 5) < s.losses.front() - 0.5);
  REQUIRE(s.last_eval.contains("top1"));
  INFO("top-1 " << s.last_eval["top1"] << " val loss " << s.last_eval["val_loss"]);
  CHECK(s.last_eval["top1"].get<double>() > 0.7);  // chance: 0.25

  // Without a val folder there is no evaluation.
  j["data"].erase("val");
  j["train"]["steps"] = 2;
  CHECK(train_json(j).last_eval.empty());
}

TEST_CASE("a run on an image folder resumes bit for bit") {
  const std::string root = stripes_dirs();
  json j = tiny_vit(16, 4);
  j["data"] = {{"type", "image_folder"},
               {"train", root + "/train"},
               {"val", root + "/val"},
               {"crop_padding", 2},
               {"hflip", true}};
  j["train"]["steps"] = 6;
  j["checkpoint"] = {{"dir", fresh_dir("images_full")}, {"every", 3}};
  TrainSummary full = train_json(j);
  j["checkpoint"]["dir"] = fresh_dir("images_parts");
  j["train"]["steps"] = 3;
  TrainSummary first = train_json(j);
  j["train"]["steps"] = 6;
  TrainSummary rest = train_json(j);
  REQUIRE(rest.start_step == 3);
  REQUIRE(rest.losses.size() == 3);
  for (size_t i = 0; i < 3; ++i) CHECK(first.losses[i] == full.losses[i]);
  for (size_t i = 0; i < 3; ++i) CHECK(rest.losses[i] == full.losses[i + 3]);
  CHECK(rest.last_eval["top1"] == full.last_eval["top1"]);
}

TEST_CASE("the ViT trainer reads CIFAR-10 files and evaluates on test_batch.bin") {
  const std::string dir = fresh_dir("cifar");
  std::filesystem::create_directories(dir);
  for (int i = 1; i <= 5; ++i)
    dt::write_cifar_file(dir + "/data_batch_" + std::to_string(i) + ".bin",
                         {uint8_t(i), uint8_t(i + 4), 0, 9}, uint64_t(i));
  dt::write_cifar_file(dir + "/test_batch.bin", {1, 2, 3, 4, 5, 6}, 99);
  json j = tiny_vit(32, 10);
  j["model"]["patch_size"] = 8;
  j["train"]["steps"] = 3;
  j["train"]["batch_size"] = 4;
  j["data"] = {{"type", "cifar10"}, {"path", dir}, {"crop_padding", 4}, {"hflip", true}};
  const ImageData data =
      load_image_data(TrainConfig::from_json(j).data,
                      vit::ViTConfig{.image_size = 32, .patch_size = 8, .num_classes = 10});
  CHECK(data.train->num_images() == 20);
  CHECK(data.val->num_images() == 6);
  TrainSummary s = train_json(j);
  REQUIRE(s.losses.size() == 3);
  for (double l : s.losses) CHECK(std::isfinite(l));
  REQUIRE(s.last_eval.contains("top1"));
  // 4 batches of 4 cover the 6 test images once: top-1 is a multiple of 1/6.
  const double top1 = s.last_eval["top1"].get<double>() * 6;
  CHECK(top1 == Approx(std::round(top1)).margin(1e-9));
}

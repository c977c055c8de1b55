// Image folders: PNG/JPEG/BMP decoding to RGB (exact for lossless formats), resizing, class
// labels by sorted folder name, and every error (undecodable file, empty class folder, missing
// root, class mismatch), or skipping bad files with a warning.
#include "models/data/image_folder.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <functional>

#include "core/error.h"
#include "tests/models/data/data_test_util.h"
#include "tests/models/data/image_test_util.h"

using namespace tessera;
using namespace tessera::data;
using namespace tessera::data::testing;

namespace {

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ValueError& e) {
    return e.what();
  }
  return "no error";
}

// Pixel (c, y, x) of a decoded (3, S, S) image.
uint8_t chw(const std::vector<uint8_t>& im, int64_t S, int c, int y, int x) {
  return im[size_t((c * S + y) * S + x)];
}

}  // namespace

TEST_CASE("PNG and BMP decode to the exact RGB pixels, planar") {
  ScratchDir dir;
  const RawImage im = pattern_image(8, 8, 3, 11);
  for (const char* name : {"a.png", "a.bmp"}) {
    INFO(name);
    write_image(dir.file(name), im);
    const std::vector<uint8_t> out = decode_image_file(dir.file(name), 8);
    REQUIRE(out.size() == 3 * 64);
    for (int y = 0; y < 8; ++y)
      for (int x = 0; x < 8; ++x)
        for (int c = 0; c < 3; ++c) REQUIRE(chw(out, 8, c, y, x) == at(im, y, x, c));
  }
}

TEST_CASE("grey and RGBA images become RGB; JPEG decodes close to what was written") {
  ScratchDir dir;
  const RawImage grey = pattern_image(6, 6, 1, 3);
  write_image(dir.file("g.png"), grey);
  std::vector<uint8_t> out = decode_image_file(dir.file("g.png"), 6);
  for (int y = 0; y < 6; ++y)
    for (int x = 0; x < 6; ++x)
      for (int c = 0; c < 3; ++c) REQUIRE(chw(out, 6, c, y, x) == at(grey, y, x, 0));

  const RawImage rgba = pattern_image(6, 6, 4, 4);
  write_image(dir.file("a.png"), rgba);
  out = decode_image_file(dir.file("a.png"), 6);
  for (int y = 0; y < 6; ++y)
    for (int x = 0; x < 6; ++x)
      for (int c = 0; c < 3; ++c) REQUIRE(chw(out, 6, c, y, x) == at(rgba, y, x, c));

  write_image(dir.file("s.jpg"), solid_image(16, 16, 200, 30, 90));
  out = decode_image_file(dir.file("s.jpg"), 16);
  const int expected[3] = {200, 30, 90};
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 16; ++y)
      for (int x = 0; x < 16; ++x) REQUIRE(std::abs(int(chw(out, 16, c, y, x)) - expected[c]) <= 3);
}

TEST_CASE("images are resized to the requested size") {
  ScratchDir dir;
  write_image(dir.file("solid.png"), solid_image(40, 24, 10, 120, 250));
  std::vector<uint8_t> out = decode_image_file(dir.file("solid.png"), 16);
  REQUIRE(out.size() == 3 * 16 * 16);
  for (int y = 0; y < 16; ++y)
    for (int x = 0; x < 16; ++x) {
      CHECK(std::abs(int(chw(out, 16, 0, y, x)) - 10) <= 1);
      CHECK(std::abs(int(chw(out, 16, 1, y, x)) - 120) <= 1);
      CHECK(std::abs(int(chw(out, 16, 2, y, x)) - 250) <= 1);
    }
  // Left half black, right half white: after downscaling 32 -> 8 the sides keep their values.
  RawImage halves = solid_image(32, 32, 0, 0, 0);
  for (int y = 0; y < 32; ++y)
    for (int x = 16; x < 32; ++x)
      for (int c = 0; c < 3; ++c) halves.pixels[size_t((y * 32 + x) * 3 + c)] = 255;
  write_image(dir.file("halves.png"), halves);
  out = decode_image_file(dir.file("halves.png"), 8);
  for (int y = 0; y < 8; ++y) {
    CHECK(chw(out, 8, 1, y, 0) <= 2);
    CHECK(chw(out, 8, 1, y, 7) >= 253);
  }
}

TEST_CASE("an image folder: classes sorted by name, files sorted, non-images ignored") {
  ScratchDir dir;
  const std::string root = dir.file("root");
  write_image(root + "/zebra/1.png", solid_image(4, 4, 1, 1, 1));
  write_image(root + "/apple/b.bmp", solid_image(4, 4, 2, 2, 2));
  write_image(root + "/apple/a.PNG", solid_image(4, 4, 3, 3, 3));
  write_image(root + "/mango/x.jpg", solid_image(4, 4, 128, 128, 128));
  write_file(root + "/mango/notes.txt", "not an image");
  write_file(root + "/README", "ignored");
  std::filesystem::create_directories(root + "/.hidden");
  ImageDataset d = load_image_folder(root, {.image_size = 4});
  CHECK(d.class_names() == std::vector<std::string>{"apple", "mango", "zebra"});
  REQUIRE(d.num_images() == 4);
  CHECK(d.label(0) == 0);
  CHECK(d.pixels(0)[0] == 3);  // a.PNG before b.bmp
  CHECK(d.label(1) == 0);
  CHECK(d.pixels(1)[0] == 2);
  CHECK(d.label(2) == 1);
  CHECK(std::abs(int(d.pixels(2)[5]) - 128) <= 3);
  CHECK(d.label(3) == 2);
  CHECK(d.pixels(3)[47] == 1);
  CHECK(d.image_size() == 4);
  CHECK(d.channels() == 3);

  // Normalised with the ImageNet statistics by default.
  ImageBatch b = make_image_batch(d, {3});
  const ImageNorm n = imagenet_norm();
  CHECK(b.images.data<float>()[0] == Approx((1.0f / 255.0f - n.mean[0]) / n.std[0]));
  CHECK(b.labels.data<int64_t>()[0] == 2);
}

TEST_CASE("image folder errors name the file or folder") {
  ScratchDir dir;
  const std::string root = dir.file("root");
  write_image(root + "/cat/ok.png", solid_image(4, 4, 9, 9, 9));
  write_image(root + "/dog/ok.png", solid_image(4, 4, 9, 9, 9));
  write_file(root + "/dog/broken.png", "\x89PNG but not really");

  std::string msg = error_of([&] { load_image_folder(root, {.image_size = 4}); });
  CHECK_THAT(msg, Catch::Contains(root + "/dog/broken.png") && Catch::Contains("cannot decode"));

  // Skipped with a warning when asked.
  std::vector<std::string> skipped;
  ImageDataset d = load_image_folder(root, {.image_size = 4, .skip_bad = true}, &skipped);
  CHECK(d.num_images() == 2);
  REQUIRE(skipped.size() == 1);
  CHECK_THAT(skipped[0], Catch::Contains("broken.png"));

  // A class folder without (decodable) images.
  std::filesystem::create_directories(root + "/emu");
  write_file(root + "/emu/readme.txt", "no images here");
  msg = error_of([&] { load_image_folder(root, {.image_size = 4, .skip_bad = true}); });
  CHECK_THAT(msg, Catch::Contains(root + "/emu") && Catch::Contains("'emu', found none"));
  std::filesystem::remove_all(root + "/emu");
  std::filesystem::remove(root + "/cat/ok.png");
  write_file(root + "/cat/bad.jpg", "garbage");
  msg = error_of([&] { load_image_folder(root, {.image_size = 4, .skip_bad = true}); });
  CHECK_THAT(msg, Catch::Contains(root + "/cat") && Catch::Contains("that decodes"));

  msg = error_of([&] { load_image_folder(dir.file("missing"), {.image_size = 4}); });
  CHECK_THAT(msg, Catch::Contains(dir.file("missing")) && Catch::Contains("does not exist"));
  std::filesystem::create_directories(dir.file("flat"));
  write_image(dir.file("flat/a.png"), solid_image(4, 4, 0, 0, 0));
  msg = error_of([&] { load_image_folder(dir.file("flat"), {.image_size = 4}); });
  CHECK_THAT(msg, Catch::Contains("expected class folders") && Catch::Contains("found none"));

  // An evaluation folder must have the training folder's classes.
  ImageFolderOptions o{
      .image_size = 4, .skip_bad = true, .norm = imagenet_norm(), .classes = {"cat", "dog", "owl"}};
  msg = error_of([&] { load_image_folder(root, o); });
  CHECK_THAT(msg, Catch::Contains("expected the classes [cat, dog, owl]") &&
                      Catch::Contains("got [cat, dog]"));
  msg = error_of([&] { decode_image_file(dir.file("nothing.png"), 4); });
  CHECK_THAT(msg, Catch::Contains(dir.file("nothing.png")) && Catch::Contains("cannot open"));
}

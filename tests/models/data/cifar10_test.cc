// CIFAR-10 binary files: exact pixels and labels, the normalisation, and every error (truncated,
// empty, bad label, missing files).
#include "models/data/cifar10.h"

#include <catch2/catch.hpp>
#include <cmath>
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

void write_split_files(const ScratchDir& dir) {
  for (int i = 1; i <= 5; ++i)
    write_cifar_file(dir.file("data_batch_" + std::to_string(i) + ".bin"),
                     {uint8_t(i), uint8_t(9 - i)}, uint64_t(i));
  write_cifar_file(dir.file("test_batch.bin"), {0, 3, 9}, 77);
}

}  // namespace

TEST_CASE("a CIFAR-10 file reads back its labels and planar RGB pixels exactly") {
  ScratchDir dir;
  write_cifar_file(dir.file("f.bin"), {3, 0, 9}, 5);
  std::vector<uint8_t> pixels;
  std::vector<int64_t> labels;
  read_cifar10_file(dir.file("f.bin"), pixels, labels);
  CHECK(labels == std::vector<int64_t>{3, 0, 9});
  REQUIRE(pixels.size() == 3 * 3072);
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t j = 0; j < 3072; ++j)
      if (pixels[size_t(r * 3072 + j)] != cifar_pixel(5, r, j))
        FAIL("record " << r << " byte " << j);
}

TEST_CASE("load_cifar10 reads the five training files in order and the test file") {
  ScratchDir dir;
  write_split_files(dir);
  ImageDataset train = load_cifar10(dir.path(), Cifar10Split::train);
  REQUIRE(train.num_images() == 10);
  CHECK(train.channels() == 3);
  CHECK(train.image_size() == 32);
  CHECK(train.num_classes() == 10);
  CHECK(train.class_names()[9] == "truck");
  for (int i = 1; i <= 5; ++i) {
    CHECK(train.label(2 * (i - 1)) == i);
    CHECK(train.label(2 * (i - 1) + 1) == 9 - i);
  }
  // Image 5 is record 1 of data_batch_3.bin; byte 1024 + 32 * 2 + 7 is green at (y 2, x 7).
  CHECK(train.pixels(5)[1024 + 64 + 7] == cifar_pixel(3, 1, 1024 + 64 + 7));
  ImageDataset test = load_cifar10(dir.path(), Cifar10Split::test);
  REQUIRE(test.num_images() == 3);
  CHECK(test.label(2) == 9);

  // Batches are normalised per channel with the CIFAR statistics.
  ImageBatch b = make_image_batch(test, {2, 0});
  REQUIRE(b.images.shape() == Shape{2, 3, 32, 32});
  CHECK(b.labels.data<int64_t>()[0] == 9);
  CHECK(b.labels.data<int64_t>()[1] == 0);
  const ImageNorm n = cifar10_norm();
  for (int64_t c = 0; c < 3; ++c) {
    const int64_t j = c * 1024 + 5 * 32 + 11;  // (c, y 5, x 11)
    const float expected =
        (float(cifar_pixel(77, 2, j)) / 255.0f - n.mean[size_t(c)]) / n.std[size_t(c)];
    CHECK(b.images.data<float>()[j] == Approx(expected).epsilon(1e-6));
  }
}

TEST_CASE("CIFAR-10 errors name the file and the problem") {
  ScratchDir dir;
  std::vector<uint8_t> pixels;
  std::vector<int64_t> labels;

  write_cifar_file(dir.file("cut.bin"), {1, 2}, 0);
  std::filesystem::resize_file(dir.file("cut.bin"), 3073 + 100);
  std::string msg = error_of([&] { read_cifar10_file(dir.file("cut.bin"), pixels, labels); });
  CHECK_THAT(msg, Catch::Contains(dir.file("cut.bin")) && Catch::Contains("multiple of 3073") &&
                      Catch::Contains("record 1 is truncated after 100 bytes"));

  write_file(dir.file("empty.bin"), "");
  msg = error_of([&] { read_cifar10_file(dir.file("empty.bin"), pixels, labels); });
  CHECK_THAT(msg, Catch::Contains(dir.file("empty.bin")) && Catch::Contains("empty file"));

  write_cifar_file(dir.file("label.bin"), {1, 2, 12}, 0);
  msg = error_of([&] { read_cifar10_file(dir.file("label.bin"), pixels, labels); });
  CHECK_THAT(msg, Catch::Contains(dir.file("label.bin")) && Catch::Contains("record 2") &&
                      Catch::Contains("byte offset 6146") &&
                      Catch::Contains("expected a label in 0..9, got 12"));

  msg = error_of([&] { read_cifar10_file(dir.file("nope.bin"), pixels, labels); });
  CHECK_THAT(msg, Catch::Contains(dir.file("nope.bin")) && Catch::Contains("cannot read"));

  write_split_files(dir);
  std::filesystem::remove(dir.file("data_batch_2.bin"));
  std::filesystem::remove(dir.file("data_batch_4.bin"));
  msg = error_of([&] { load_cifar10(dir.path(), Cifar10Split::train); });
  CHECK_THAT(msg, Catch::Contains("missing " + dir.file("data_batch_2.bin") + ", " +
                                  dir.file("data_batch_4.bin")));
  CHECK(error_of([&] { load_cifar10(dir.path(), Cifar10Split::test); }) == "no error");

  // A bad file inside a split is named too.
  write_cifar_file(dir.file("data_batch_2.bin"), {1}, 0);
  write_cifar_file(dir.file("data_batch_4.bin"), {10}, 0);
  msg = error_of([&] { load_cifar10(dir.path(), Cifar10Split::train); });
  CHECK_THAT(msg, Catch::Contains(dir.file("data_batch_4.bin")) && Catch::Contains("got 10"));
}

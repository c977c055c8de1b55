// Image training streams: deterministic seeded order, resume mid-stream, rank sharding, and the
// random crop / flip augmentations (seeded, tied to stream positions); the evaluation order.
#include "models/data/image_loader.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <set>
#include <tuple>

#include "core/error.h"

using namespace tessera;
using namespace tessera::data;

namespace {

constexpr int64_t kS = 6;

// n images whose pixels identify them (the first pixel is 1 + 16 i) and are never 0, so the black
// padding of a crop is recognisable.
std::shared_ptr<const ImageDataset> numbered_images(int64_t n = 13) {
  std::vector<uint8_t> pixels;
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t y = 0; y < kS; ++y)
        for (int64_t x = 0; x < kS; ++x)
          pixels.push_back(uint8_t(1 + i * 16 + c + (y * kS + x) * 7 % 13));
    labels.push_back(i % 4);
  }
  // mean 0, std 1/255: a batch holds the raw byte values, so tests can compare exactly.
  ImageNorm identity{{0, 0, 0}, {1.0f / 255, 1.0f / 255, 1.0f / 255}};
  return std::make_shared<const ImageDataset>(std::move(pixels), std::move(labels), 3, kS,
                                              std::vector<std::string>{"a", "b", "c", "d"},
                                              identity, "numbered");
}

// Row r of a batch, (C, S, S) flattened.
std::vector<float> row(const ImageBatch& b, int64_t r) {
  const float* p = b.images.data<float>() + r * 3 * kS * kS;
  return std::vector<float>(p, p + 3 * kS * kS);
}

// Pixel (c, y, x) of image i cropped at offset (dy, dx) (black outside) and maybe mirrored.
float transformed(const ImageDataset& d, int64_t i, int64_t c, int64_t y, int64_t x, int64_t dy,
                  int64_t dx, bool flip) {
  const int64_t sy = y + dy, sx = (flip ? kS - 1 - x : x) + dx;
  if (sy < 0 || sy >= kS || sx < 0 || sx >= kS) return 0;
  return float(d.pixels(i)[(c * kS + sy) * kS + sx]);
}

// The (dy, dx, flip) that turns image i into the batch row, or none.
std::vector<std::tuple<int64_t, int64_t, bool>> explanations(const ImageDataset& d, int64_t i,
                                                             const std::vector<float>& got,
                                                             int64_t pad) {
  std::vector<std::tuple<int64_t, int64_t, bool>> out;
  for (int64_t dy = -pad; dy <= pad; ++dy)
    for (int64_t dx = -pad; dx <= pad; ++dx)
      for (bool flip : {false, true}) {
        bool same = true;
        for (int64_t c = 0; c < 3 && same; ++c)
          for (int64_t y = 0; y < kS && same; ++y)
            for (int64_t x = 0; x < kS && same; ++x)
              same = std::abs(got[size_t((c * kS + y) * kS + x)] -
                              transformed(d, i, c, y, x, dy, dx, flip)) < 1e-3f;
        if (same) out.emplace_back(dy, dx, flip);
      }
  return out;
}

std::vector<int64_t> labels_of(const ImageBatch& b) {
  return std::vector<int64_t>(b.labels.data<int64_t>(),
                              b.labels.data<int64_t>() + b.labels.numel());
}

bool same_batch(const ImageBatch& a, const ImageBatch& b) {
  if (labels_of(a) != labels_of(b) || a.images.numel() != b.images.numel()) return false;
  for (int64_t k = 0; k < a.images.numel(); ++k)
    if (a.images.data<float>()[k] != b.images.data<float>()[k]) return false;
  return true;
}

// The image index a plain (unaugmented) row shows (normalisation rounds, hence the tolerance).
int64_t which(const ImageDataset& d, const std::vector<float>& got) {
  for (int64_t i = 0; i < d.num_images(); ++i) {
    bool same = true;
    for (int64_t k = 0; k < 3 * kS * kS && same; ++k)
      same = std::abs(got[size_t(k)] - float(d.pixels(i)[k])) < 1e-3f;
    if (same) return i;
  }
  return -1;
}

}  // namespace

TEST_CASE("the image stream visits every image once per epoch in a seeded order") {
  auto d = numbered_images();
  ImageLoader a(d, {.sampling = {.shuffle = true, .seed = 7, .rank = 0, .world_size = 1}});
  ImageLoader b(d, {.sampling = {.shuffle = true, .seed = 7, .rank = 0, .world_size = 1}});
  ImageLoader other(d, {.sampling = {.shuffle = true, .seed = 8, .rank = 0, .world_size = 1}});
  std::vector<int64_t> order, other_order;
  for (int step = 0; step < 13; ++step) {
    ImageBatch x = a.next(1), y = b.next(1), z = other.next(1);
    REQUIRE(same_batch(x, y));
    order.push_back(which(*d, row(x, 0)));
    other_order.push_back(which(*d, row(z, 0)));
    CHECK(labels_of(x)[0] == order.back() % 4);
  }
  CHECK(std::set<int64_t>(order.begin(), order.end()).size() == 13);
  CHECK(order != other_order);
  CHECK(a.position() == DataPosition{1, 0});
}

TEST_CASE("a resumed image stream continues exactly, augmentation included") {
  auto d = numbered_images();
  const ImageLoaderOptions o{.sampling = {.shuffle = true, .seed = 3, .rank = 0, .world_size = 1},
                             .augment = {.crop_padding = 2, .hflip = true, .seed = 5}};
  ImageLoader full(d, o);
  std::vector<ImageBatch> batches;
  for (int i = 0; i < 6; ++i) batches.push_back(full.next(4));  // crosses epoch ends
  ImageLoader first(d, o);
  for (int i = 0; i < 3; ++i) REQUIRE(same_batch(first.next(4), batches[size_t(i)]));
  const nlohmann::json saved = first.position().to_json();
  ImageLoader resumed(d, o);
  resumed.set_position(DataPosition::from_json(saved));
  for (int i = 3; i < 6; ++i) CHECK(same_batch(resumed.next(4), batches[size_t(i)]));
}

TEST_CASE("two ranks together see exactly one rank's global batch, augmented alike") {
  auto d = numbered_images();
  const AugmentOptions aug{.crop_padding = 1, .hflip = true, .seed = 9};
  ImageLoader one(
      d, {.sampling = {.shuffle = true, .seed = 4, .rank = 0, .world_size = 1}, .augment = aug});
  ImageLoader r0(
      d, {.sampling = {.shuffle = true, .seed = 4, .rank = 0, .world_size = 2}, .augment = aug});
  ImageLoader r1(
      d, {.sampling = {.shuffle = true, .seed = 4, .rank = 1, .world_size = 2}, .augment = aug});
  for (int step = 0; step < 5; ++step) {
    ImageBatch g = one.next(6), a = r0.next(3), b = r1.next(3);
    for (int64_t k = 0; k < 3; ++k) {
      CHECK(row(a, k) == row(g, k));
      CHECK(row(b, k) == row(g, 3 + k));
      CHECK(labels_of(a)[size_t(k)] == labels_of(g)[size_t(k)]);
    }
  }
  CHECK(r0.position() == one.position());
  CHECK(r1.position() == one.position());
}

TEST_CASE("random crops shift the image within the padding and flips mirror it") {
  auto d = numbered_images();
  const int64_t pad = 2;
  ImageLoader plain(d, {.sampling = {.shuffle = true, .seed = 1, .rank = 0, .world_size = 1}});
  ImageLoader aug(d, {.sampling = {.shuffle = true, .seed = 1, .rank = 0, .world_size = 1},
                      .augment = {.crop_padding = pad, .hflip = true, .seed = 2}});
  std::set<std::tuple<int64_t, int64_t, bool>> seen;
  int64_t changed = 0;
  for (int step = 0; step < 10; ++step) {
    ImageBatch p = plain.next(13), a = aug.next(13);
    CHECK(labels_of(p) == labels_of(a));
    for (int64_t k = 0; k < 13; ++k) {
      const int64_t i = which(*d, row(p, k));
      REQUIRE(i >= 0);
      const auto ways = explanations(*d, i, row(a, k), pad);
      REQUIRE(!ways.empty());  // every augmented image is a crop (and maybe mirror) of its source
      seen.insert(ways.front());
      if (row(a, k) != row(p, k)) ++changed;
    }
  }
  CHECK(seen.size() > 20);  // of the 5 x 5 x 2 = 50 possible transforms
  CHECK(changed > 100);     // of 130: the identity transform is 1 in 50
  bool flipped = false, unflipped = false;
  for (const auto& w : seen) (std::get<2>(w) ? flipped : unflipped) = true;
  CHECK((flipped && unflipped));

  // Another augmentation seed draws other transforms; without augmentation nothing changes.
  ImageLoader aug2(d, {.sampling = {.shuffle = true, .seed = 1, .rank = 0, .world_size = 1},
                       .augment = {.crop_padding = pad, .hflip = true, .seed = 3}});
  ImageLoader aug_again(d, {.sampling = {.shuffle = true, .seed = 1, .rank = 0, .world_size = 1},
                            .augment = {.crop_padding = pad, .hflip = true, .seed = 2}});
  CHECK(!same_batch(aug2.next(13), aug_again.next(13)));
}

TEST_CASE("evaluation reads each held-out image once, in order, across ranks") {
  std::vector<int64_t> all;
  for (int64_t batch = 0; batch < 4; ++batch)
    for (int64_t rank = 0; rank < 3; ++rank) {
      const std::vector<int64_t> items = eval_items(20, batch, 2, rank, 3);
      all.insert(all.end(), items.begin(), items.end());
    }
  REQUIRE(all.size() == 20);
  for (int64_t i = 0; i < 20; ++i) CHECK(all[size_t(i)] == i);
  CHECK(eval_items(20, 3, 2, 2, 3).empty());
  CHECK(eval_items(20, 3, 2, 1, 3) == std::vector<int64_t>{});
  CHECK(eval_items(20, 3, 2, 0, 3) == std::vector<int64_t>{18, 19});
  CHECK_THROWS_AS(eval_items(20, 0, 2, 3, 3), ValueError);
}

TEST_CASE("an image dataset rejects inconsistent pixels, labels and statistics") {
  const ImageNorm n = imagenet_norm();
  CHECK_THROWS_WITH(ImageDataset(std::vector<uint8_t>(10), {0}, 3, 2, {"a"}, n, "src"),
                    Catch::Contains("src") && Catch::Contains("expected 1 images x 12 bytes"));
  CHECK_THROWS_WITH(ImageDataset(std::vector<uint8_t>(12), {1}, 3, 2, {"a"}, n, "src"),
                    Catch::Contains("image 0: expected a label in [0, 1), got 1"));
  CHECK_THROWS_WITH(ImageDataset({}, {}, 3, 2, {"a"}, n, "src"),
                    Catch::Contains("at least one image"));
  CHECK_THROWS_WITH(ImageDataset(std::vector<uint8_t>(12), {0}, 3, 2, {"a"}, {{0.5f}, {0.5f}}, "s"),
                    Catch::Contains("a mean and std per channel (3)"));
}

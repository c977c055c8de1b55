// In-memory image datasets and their normalised, augmented batches (see image_dataset.h).
#include "models/data/image_dataset.h"

#include "core/error.h"
#include "core/factory.h"
#include "core/philox.h"

namespace tessera::data {

ImageNorm cifar10_norm() { return {{0.4914f, 0.4822f, 0.4465f}, {0.2470f, 0.2435f, 0.2616f}}; }

ImageNorm imagenet_norm() { return {{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}}; }

ImageDataset::ImageDataset(std::vector<uint8_t> pixels, std::vector<int64_t> labels,
                           int64_t channels, int64_t image_size,
                           std::vector<std::string> class_names, ImageNorm norm, std::string source)
    : pixels_(std::move(pixels)),
      labels_(std::move(labels)),
      channels_(channels),
      image_size_(image_size),
      class_names_(std::move(class_names)),
      norm_(std::move(norm)),
      source_(std::move(source)) {
  TS_CHECK(channels_ > 0 && image_size_ > 0, "image_dataset", source_,
           ": expected positive channels and image size, got ", channels_, " and ", image_size_);
  TS_CHECK(!labels_.empty(), "image_dataset", source_, ": expected at least one image, got none");
  TS_CHECK(pixels_.size() == labels_.size() * size_t(image_bytes()), "image_dataset", source_,
           ": expected ", labels_.size(), " images x ", image_bytes(), " bytes, got ",
           pixels_.size(), " bytes");
  TS_CHECK(norm_.mean.size() == size_t(channels_) && norm_.std.size() == size_t(channels_),
           "image_dataset", source_, ": expected a mean and std per channel (", channels_,
           "), got ", norm_.mean.size(), " and ", norm_.std.size());
  for (float s : norm_.std)
    TS_CHECK(s > 0, "image_dataset", source_, ": expected positive std values, got ", s);
  for (size_t i = 0; i < labels_.size(); ++i)
    TS_CHECK(labels_[i] >= 0 && labels_[i] < num_classes(), "image_dataset", source_, ": image ", i,
             ": expected a label in [0, ", num_classes(), "), got ", labels_[i]);
}

const uint8_t* ImageDataset::pixels(int64_t image) const {
  TS_CHECK(image >= 0 && image < num_images(), "image_dataset", source_,
           ": expected an image index in [0, ", num_images(), "), got ", image);
  return pixels_.data() + size_t(image * image_bytes());
}

ImageBatch make_image_batch(const ImageDataset& d, const std::vector<int64_t>& items,
                            const AugmentOptions& aug, int64_t first_position) {
  TS_CHECK(aug.crop_padding >= 0, "image_batch", "expected crop_padding >= 0, got ",
           aug.crop_padding);
  const int64_t B = int64_t(items.size()), C = d.channels(), S = d.image_size();
  ImageBatch out{empty({B, C, S, S}), empty({B}, {.dtype = DType::i64})};  // (B, C, S, S), (B)
  float* px = out.images.data<float>();
  int64_t* labels = out.labels.data<int64_t>();
  // A lookup table per channel: 256 values, so the per-pixel work is one load.
  std::vector<float> table(size_t(C) * 256);
  for (int64_t c = 0; c < C; ++c)
    for (int v = 0; v < 256; ++v)
      table[size_t(c * 256 + v)] =
          (float(v) / 255.0f - d.norm().mean[size_t(c)]) / d.norm().std[size_t(c)];
  const int64_t pad = aug.crop_padding;
  for (int64_t b = 0; b < B; ++b) {
    const uint8_t* src = d.pixels(items[size_t(b)]);
    labels[b] = d.label(items[size_t(b)]);
    int64_t dy = 0, dx = 0;  // the crop's offset into the padded image, minus the padding
    bool flip = false;
    if (aug.enabled()) {
      const Philox4 r = philox(aug.seed ^ 0xA06E47A7E5ull, uint64_t(first_position + b));
      if (pad > 0) {
        dy = int64_t(r.v[0] % uint32_t(2 * pad + 1)) - pad;
        dx = int64_t(r.v[1] % uint32_t(2 * pad + 1)) - pad;
      }
      flip = aug.hflip && (r.v[2] & 1u);
    }
    for (int64_t c = 0; c < C; ++c) {
      const float* lut = table.data() + c * 256;
      float* dst = px + (b * C + c) * S * S;
      for (int64_t y = 0; y < S; ++y)
        for (int64_t x = 0; x < S; ++x) {
          // Crop, then mirror the crop.
          const int64_t sy = y + dy, sx = (flip ? S - 1 - x : x) + dx;
          const bool inside = sy >= 0 && sy < S && sx >= 0 && sx < S;
          dst[y * S + x] = lut[inside ? src[(c * S + sy) * S + sx] : 0];
        }
    }
  }
  return out;
}

}  // namespace tessera::data

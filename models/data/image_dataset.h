// Images held in memory as 8-bit pixels (N, C, S, S) with class labels, and the batches made from
// them: normalised per channel to f32, optionally randomly cropped (with padding) and flipped.
// CIFAR-10 (cifar10.h) and image folders (image_folder.h) both load into an ImageDataset.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace tessera::data {

// Per-channel statistics of pixel values scaled to [0, 1]: a batch holds (x / 255 - mean) / std.
struct ImageNorm {
  std::vector<float> mean;
  std::vector<float> std;
};

// The usual CIFAR-10 training-set statistics and ImageNet's (the default for image folders).
ImageNorm cifar10_norm();
ImageNorm imagenet_norm();

class ImageDataset {
 public:
  // pixels: num_images * channels * size * size bytes, image-major then channel-major (CHW);
  // labels: one per image in [0, class_names.size()). `source` names the data in messages.
  // Throws ValueError on inconsistent sizes or labels.
  ImageDataset(std::vector<uint8_t> pixels, std::vector<int64_t> labels, int64_t channels,
               int64_t image_size, std::vector<std::string> class_names, ImageNorm norm,
               std::string source);

  int64_t num_images() const { return int64_t(labels_.size()); }
  int64_t channels() const { return channels_; }
  int64_t image_size() const { return image_size_; }
  int64_t num_classes() const { return int64_t(class_names_.size()); }
  const std::vector<std::string>& class_names() const { return class_names_; }
  const ImageNorm& norm() const { return norm_; }
  const std::string& source() const { return source_; }

  const uint8_t* pixels(int64_t image) const;  // (C, S, S)
  int64_t label(int64_t image) const { return labels_[size_t(image)]; }
  int64_t image_bytes() const { return channels_ * image_size_ * image_size_; }

 private:
  std::vector<uint8_t> pixels_;
  std::vector<int64_t> labels_;
  int64_t channels_, image_size_;
  std::vector<std::string> class_names_;
  ImageNorm norm_;
  std::string source_;
};

// Training augmentations. Draws depend only on (seed, the image's position in the sample stream),
// so a resumed run or another rank layout augments each draw the same way.
struct AugmentOptions {
  int64_t crop_padding =
      0;               // > 0: a random S x S crop of the image padded by this many black pixels
  bool hflip = false;  // mirror left-right with probability 1/2
  uint64_t seed = 0;

  bool enabled() const { return crop_padding > 0 || hflip; }
};

struct ImageBatch {
  Tensor images;  // (B, C, S, S) f32, normalised
  Tensor labels;  // (B) i64
};

// The images `items` of `dataset`; item b is augmented with stream position first_position + b
// (ignored when augmentation is off).
ImageBatch make_image_batch(const ImageDataset& dataset, const std::vector<int64_t>& items,
                            const AugmentOptions& augment = {}, int64_t first_position = 0);

}  // namespace tessera::data

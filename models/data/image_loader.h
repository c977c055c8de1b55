// A training stream over an in-memory ImageDataset: the token sampler's seeded, resumable,
// rank-sharded order (sampler.h) plus seeded augmentation; and the fixed evaluation order.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "models/data/image_dataset.h"
#include "models/data/sampler.h"

namespace tessera::data {

struct ImageLoaderOptions {
  SamplerOptions sampling = {};
  AugmentOptions augment = {};
};

class ImageLoader {
 public:
  ImageLoader(std::shared_ptr<const ImageDataset> dataset, const ImageLoaderOptions& options);

  // This rank's next batch_size images (the global batch is batch_size x world_size).
  ImageBatch next(int64_t batch_size);
  const DataPosition& position() const { return sampler_.position(); }
  void set_position(const DataPosition& position) { sampler_.set_position(position); }
  const ImageDataset& dataset() const { return *dataset_; }

 private:
  std::shared_ptr<const ImageDataset> dataset_;
  ImageLoaderOptions options_;
  Sampler sampler_;
};

// Evaluation reads images 0, 1, 2, ... in order, each once: global batch g holds images
// [g * batch_size * world_size, (g + 1) * batch_size * world_size) and rank r its r-th block of
// batch_size. Returns rank r's images of batch g, fewer (or none) at the end of the set.
std::vector<int64_t> eval_items(int64_t num_images, int64_t batch, int64_t batch_size, int64_t rank,
                                int64_t world_size);

}  // namespace tessera::data

// Shuffled, sharded, augmented image batches for training, and the evaluation order (see
// image_loader.h).
#include "models/data/image_loader.h"

#include <algorithm>

#include "core/error.h"
#include "core/profiler.h"

namespace tessera::data {

ImageLoader::ImageLoader(std::shared_ptr<const ImageDataset> dataset,
                         const ImageLoaderOptions& options)
    : dataset_(std::move(dataset)),
      options_(options),
      sampler_(dataset_ ? dataset_->num_images() : 0, options.sampling) {}

ImageBatch ImageLoader::next(int64_t batch_size) {
  TS_PROFILE("data", "step");
  const DataPosition before = sampler_.position();
  // The stream position of this rank's first image, the same whatever the rank layout, so
  // augmentation draws follow the image's place in the stream.
  const int64_t first =
      before.epoch * dataset_->num_images() + before.index + options_.sampling.rank * batch_size;
  const std::vector<int64_t> items = sampler_.next(batch_size);
  return make_image_batch(*dataset_, items, options_.augment, first);
}

std::vector<int64_t> eval_items(int64_t num_images, int64_t batch, int64_t batch_size, int64_t rank,
                                int64_t world_size) {
  TS_CHECK(num_images >= 0 && batch >= 0 && batch_size >= 1 && rank >= 0 && rank < world_size,
           "eval_items", "expected num_images >= 0, batch >= 0, batch_size >= 1 and 0 <= rank < ",
           "world_size, got ", num_images, ", ", batch, ", ", batch_size, ", rank ", rank, " of ",
           world_size);
  const int64_t begin = (batch * world_size + rank) * batch_size;
  const int64_t end = std::min(begin + batch_size, num_images);
  std::vector<int64_t> items;
  for (int64_t i = begin; i < end; ++i) items.push_back(i);
  return items;
}

}  // namespace tessera::data

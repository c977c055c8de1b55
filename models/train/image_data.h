// The ViT trainer's image data from the config's data section: CIFAR-10 binaries or image folders
// (models/data), loaded into memory and checked against the model's image size, channels and
// classes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/data/image_dataset.h"
#include "models/train/train_config.h"
#include "models/vit/vit_config.h"

namespace tessera::train {

struct ImageData {
  std::shared_ptr<const data::ImageDataset> train;
  std::shared_ptr<const data::ImageDataset> val;  // null: no evaluation
  std::vector<std::string> skipped;               // image_folder files skipped as undecodable
};

// data.type must be "cifar10" or "image_folder". Throws ValueError "[config] data...: ..." when
// the data does not fit the model, and the loaders' errors (naming the file) for bad data.
ImageData load_image_data(const DataSection& data, const vit::ViTConfig& model);

}  // namespace tessera::train

// Loading CIFAR-10 or image folders for the ViT trainer and checking them against the model (see
// image_data.h).
#include "models/train/image_data.h"

#include "core/error.h"
#include "models/data/cifar10.h"
#include "models/data/image_folder.h"

namespace tessera::train {

namespace {

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

ImageData load_cifar10(const DataSection& d, const vit::ViTConfig& m) {
  TS_CHECK(m.image_size == data::kCifarImageSize && m.in_channels == 3, "config",
           "data.type cifar10: its images are 32x32 RGB; expected model.image_size 32 and ",
           "model.in_channels 3, got ", m.image_size, " and ", m.in_channels);
  TS_CHECK(m.num_classes == data::kCifarClasses, "config",
           "data.type cifar10: it has 10 classes; expected model.num_classes 10, got ",
           m.num_classes);
  ImageData out;
  out.train = std::make_shared<const data::ImageDataset>(
      data::load_cifar10(d.path, data::Cifar10Split::train));
  out.val = std::make_shared<const data::ImageDataset>(
      data::load_cifar10(d.path, data::Cifar10Split::test));
  return out;
}

ImageData load_folders(const DataSection& d, const vit::ViTConfig& m) {
  TS_CHECK(m.in_channels == 3, "config",
           "data.type image_folder: images are decoded to RGB; expected model.in_channels 3, got ",
           m.in_channels);
  ImageData out;
  data::ImageFolderOptions o;
  o.image_size = m.image_size;
  o.skip_bad = d.skip_bad_images;
  out.train =
      std::make_shared<const data::ImageDataset>(data::load_image_folder(d.train, o, &out.skipped));
  const std::vector<std::string>& classes = out.train->class_names();
  TS_CHECK(out.train->num_classes() == m.num_classes, "config", "data.train: ", d.train, " has ",
           classes.size(), " classes (", join(classes), "); expected model.num_classes ",
           m.num_classes, " to match");
  if (!d.val.empty()) {
    o.classes = classes;
    out.val =
        std::make_shared<const data::ImageDataset>(data::load_image_folder(d.val, o, &out.skipped));
  }
  return out;
}

}  // namespace

ImageData load_image_data(const DataSection& d, const vit::ViTConfig& m) {
  if (d.type == "cifar10") return load_cifar10(d, m);
  TS_CHECK(d.type == "image_folder", "config",
           "data.type: expected cifar10 or image_folder for image data, got '", d.type, "'");
  return load_folders(d, m);
}

}  // namespace tessera::train

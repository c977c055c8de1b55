// Image folders: root/<class>/<image>, classes sorted by name give labels 0, 1, ...; PNG, JPEG
// and BMP files (by extension) are decoded with stb_image, converted to RGB, resized to the
// model's square size and cached in memory as 8-bit pixels (decoded once, at load: the layout
// for small datasets, 3 x S x S bytes per image).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/data/image_dataset.h"

namespace tessera::data {

struct ImageFolderOptions {
  int64_t image_size = 32;  // every image is resized (stretched) to image_size x image_size
  // false: an undecodable image is an error naming it; true: it is skipped with a warning.
  bool skip_bad = false;
  ImageNorm norm = imagenet_norm();
  // Non-empty: the class folders the root must hold, exactly (an evaluation folder must have the
  // training folder's classes, so labels agree).
  std::vector<std::string> classes = {};
};

// True for the extensions read: .png, .jpg, .jpeg, .bmp (any case).
bool is_image_file(const std::string& path);

// One file decoded to RGB and resized: (3, size, size) u8. Throws ValueError naming the file
// when it cannot be read or decoded.
std::vector<uint8_t> decode_image_file(const std::string& path, int64_t size);

// Loads every image under root. Throws ValueError for a missing root, a root without class
// folders, a class folder without images (after skipping bad ones), an undecodable image (unless
// skip_bad) or classes other than options.classes. Skipped files are appended to `skipped`
// ("path: reason") when given.
ImageDataset load_image_folder(const std::string& root, const ImageFolderOptions& options,
                               std::vector<std::string>* skipped = nullptr);

}  // namespace tessera::data

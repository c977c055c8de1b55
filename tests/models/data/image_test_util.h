// Helpers for the image data tests: CIFAR-10 records and PNG/JPEG/BMP files written with
// stb_image_write, and a generated image folder of learnable classes (coloured stripes).
#pragma once

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/philox.h"
#include "stb/stb_image_write.h"

namespace tessera::data::testing {

// An image as interleaved 8-bit samples (H, W, channels), as stb reads and writes them.
struct RawImage {
  int width = 0, height = 0, channels = 3;
  std::vector<uint8_t> pixels;
};

// Deterministic varied pixels: value depends on (seed, x, y, channel).
inline RawImage pattern_image(int width, int height, int channels, uint64_t seed) {
  RawImage im{width, height, channels, std::vector<uint8_t>(size_t(width * height * channels))};
  for (size_t i = 0; i < im.pixels.size(); ++i) im.pixels[i] = uint8_t(philox(seed, i).v[0]);
  return im;
}

inline RawImage solid_image(int width, int height, uint8_t r, uint8_t g, uint8_t b) {
  RawImage im{width, height, 3, {}};
  for (int i = 0; i < width * height; ++i) im.pixels.insert(im.pixels.end(), {r, g, b});
  return im;
}

// Writes by extension: .png, .jpg (quality 95) or .bmp.
inline void write_image(const std::string& path, const RawImage& im) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::string ext = std::filesystem::path(path).extension().string();
  for (char& ch : ext) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  int ok = 0;
  if (ext == ".png")
    ok = stbi_write_png(path.c_str(), im.width, im.height, im.channels, im.pixels.data(),
                        im.width * im.channels);
  else if (ext == ".jpg")
    ok = stbi_write_jpg(path.c_str(), im.width, im.height, im.channels, im.pixels.data(), 95);
  else if (ext == ".bmp")
    ok = stbi_write_bmp(path.c_str(), im.width, im.height, im.channels, im.pixels.data());
  if (!ok) throw std::runtime_error("write_image failed: " + path);
}

// Sample (y, x, c) of an interleaved image.
inline uint8_t at(const RawImage& im, int y, int x, int c) {
  return im.pixels[size_t((y * im.width + x) * im.channels + c)];
}

// CIFAR-10 record i of a test file: label labels[i]; pixel byte j = (seed * 31 + i * 7 + j) % 256.
inline uint8_t cifar_pixel(uint64_t seed, int64_t record, int64_t j) {
  return uint8_t((seed * 31 + uint64_t(record) * 7 + uint64_t(j)) % 256);
}

inline void write_cifar_file(const std::string& path, const std::vector<uint8_t>& labels,
                             uint64_t seed) {
  std::ofstream out(path, std::ios::binary);
  for (size_t r = 0; r < labels.size(); ++r) {
    out.put(char(labels[r]));
    for (int64_t j = 0; j < 3072; ++j) out.put(char(cifar_pixel(seed, int64_t(r), j)));
  }
}

// A learnable class k of `classes` (at most 6): stripes of colour k's hue, horizontal for even k
// and vertical for odd k, with a random stripe phase and pixel noise, on a dark background.
inline RawImage stripes_image(int size, int k, uint64_t seed) {
  static const uint8_t kColours[6][3] = {{220, 40, 40},  {40, 200, 40},  {40, 60, 230},
                                         {220, 200, 40}, {200, 40, 200}, {40, 200, 200}};
  RawImage im{size, size, 3, std::vector<uint8_t>(size_t(size * size * 3))};
  const Philox4 r = philox(seed, 0);
  const int phase = int(r.v[0] % 4u);
  for (int y = 0; y < size; ++y)
    for (int x = 0; x < size; ++x) {
      const int t = (k % 2 == 0 ? y : x) + phase;
      const bool on = (t / 2) % 2 == 0;
      for (int c = 0; c < 3; ++c) {
        const int noise = int(philox(seed, uint64_t(1 + (y * size + x) * 3 + c)).v[0] % 41u) - 20;
        const int base = on ? kColours[k % 6][c] : 30;
        im.pixels[size_t((y * size + x) * 3 + c)] = uint8_t(std::clamp(base + noise, 0, 255));
      }
    }
  return im;
}

// root/class_<k>/img_<i>.png with `per_class` stripes images of `size` for each of `classes`.
inline void write_stripes_folder(const std::string& root, int classes, int per_class, int size,
                                 uint64_t seed) {
  for (int k = 0; k < classes; ++k)
    for (int i = 0; i < per_class; ++i)
      write_image(root + "/class_" + std::to_string(k) + "/img_" + std::to_string(i) + ".png",
                  stripes_image(size, k, seed * 1000003 + uint64_t(k * per_class + i)));
}

}  // namespace tessera::data::testing

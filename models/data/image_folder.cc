// Decoding (stb_image), resizing (stb_image_resize) and caching image folders (see image_folder.h).
#include "models/data/image_folder.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "core/error.h"
#include "core/logging.h"
#include "stb/stb_image.h"
#include "stb/stb_image_resize.h"

namespace tessera::data {

namespace fs = std::filesystem;

namespace {

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// Visible entries of dir (no dot files), sorted by name, that are directories or not.
std::vector<fs::path> sorted_entries(const fs::path& dir, bool directories) {
  std::vector<fs::path> out;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().rfind('.', 0) == 0) continue;
    if (directories ? e.is_directory() : e.is_regular_file()) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct StbFree {
  void operator()(stbi_uc* p) const { stbi_image_free(p); }
};

}  // namespace

bool is_image_file(const std::string& path) {
  std::string ext = fs::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".bmp";
}

std::vector<uint8_t> decode_image_file(const std::string& path, int64_t size) {
  TS_CHECK(size > 0 && size <= 16384, "image_folder", path,
           ": expected a target size in [1, 16384], got ", size);
  std::ifstream in(path, std::ios::binary);
  TS_CHECK(in.good(), "image_folder", path, ": cannot open the file");
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string bytes = ss.str();
  TS_CHECK(!bytes.empty() && bytes.size() < size_t(INT_MAX), "image_folder", path,
           ": expected an image file of 1 byte to 2 GiB, got ", bytes.size(), " bytes");
  int w = 0, h = 0, channels_in_file = 0;
  // Asking for 3 channels makes stb convert grey, grey + alpha and RGBA to RGB.
  std::unique_ptr<stbi_uc, StbFree> rgb(
      stbi_load_from_memory(reinterpret_cast<const stbi_uc*>(bytes.data()), int(bytes.size()), &w,
                            &h, &channels_in_file, 3));
  TS_CHECK(rgb != nullptr, "image_folder", path, ": cannot decode the image as PNG, JPEG or BMP (",
           "stb_image: ", stbi_failure_reason() ? stbi_failure_reason() : "unknown reason", ")");
  const int S = int(size);
  std::vector<uint8_t> hwc(size_t(S) * size_t(S) * 3);  // (S, S, 3)
  if (w == S && h == S) {
    std::copy(rgb.get(), rgb.get() + hwc.size(), hwc.begin());
  } else {
    const int ok = stbir_resize_uint8(rgb.get(), w, h, 0, hwc.data(), S, S, 0, 3);
    TS_CHECK(ok == 1, "image_folder", path, ": resizing ", w, "x", h, " to ", S, "x", S, " failed");
  }
  std::vector<uint8_t> chw(hwc.size());  // (3, S, S)
  const size_t plane = size_t(S) * size_t(S);
  for (size_t i = 0; i < plane; ++i)
    for (size_t c = 0; c < 3; ++c) chw[c * plane + i] = hwc[i * 3 + c];
  return chw;
}

ImageDataset load_image_folder(const std::string& root, const ImageFolderOptions& o,
                               std::vector<std::string>* skipped) {
  TS_CHECK(fs::is_directory(root), "image_folder", root,
           ": expected a directory of class folders (root/<class>/<image>), but it does not exist",
           " or is not a directory");
  const std::vector<fs::path> class_dirs = sorted_entries(root, /*directories=*/true);
  std::vector<std::string> classes;
  for (const fs::path& p : class_dirs) classes.push_back(p.filename().string());
  TS_CHECK(!classes.empty(), "image_folder", root,
           ": expected class folders (root/<class>/<image>), found none");
  TS_CHECK(o.classes.empty() || o.classes == classes, "image_folder", root,
           ": expected the classes [", join(o.classes), "] (those of the training folder), got [",
           join(classes), "]");
  std::vector<uint8_t> pixels;
  std::vector<int64_t> labels;
  for (size_t k = 0; k < class_dirs.size(); ++k) {
    int64_t count = 0;
    for (const fs::path& file : sorted_entries(class_dirs[k], /*directories=*/false)) {
      if (!is_image_file(file.string())) continue;
      std::vector<uint8_t> image;
      try {
        image = decode_image_file(file.string(), o.image_size);
      } catch (const ValueError& e) {
        if (!o.skip_bad) throw;
        TS_LOG_WARN("[image_folder] skipping {}", e.what());
        if (skipped) skipped->push_back(e.what());
        continue;
      }
      pixels.insert(pixels.end(), image.begin(), image.end());
      labels.push_back(int64_t(k));
      ++count;
    }
    TS_CHECK(count > 0, "image_folder", class_dirs[k].string(),
             ": expected at least one image (.png, .jpg, .jpeg, .bmp) in class folder '",
             classes[k], "', found none", o.skip_bad ? " that decodes" : "");
  }
  return ImageDataset(std::move(pixels), std::move(labels), 3, o.image_size, std::move(classes),
                      o.norm, root);
}

}  // namespace tessera::data

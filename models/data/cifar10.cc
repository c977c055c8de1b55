// Reading and validating CIFAR-10 binary files (see cifar10.h).
#include "models/data/cifar10.h"

#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace tessera::data {

namespace fs = std::filesystem;

const std::vector<std::string>& cifar10_class_names() {
  static const std::vector<std::string> kNames = {
      "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"};
  return kNames;
}

std::vector<std::string> cifar10_files(Cifar10Split split) {
  if (split == Cifar10Split::test) return {"test_batch.bin"};
  std::vector<std::string> files;
  for (int i = 1; i <= 5; ++i) files.push_back("data_batch_" + std::to_string(i) + ".bin");
  return files;
}

void read_cifar10_file(const std::string& path, std::vector<uint8_t>& pixels,
                       std::vector<int64_t>& labels) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  TS_CHECK(!ec, "cifar10", path, ": cannot read the file (", ec.message(), ")");
  TS_CHECK(size > 0, "cifar10", path, ": expected records of ", kCifarRecordBytes,
           " bytes, got an empty file");
  TS_CHECK(size % uint64_t(kCifarRecordBytes) == 0, "cifar10", path,
           ": expected a size that is a multiple of ", kCifarRecordBytes,
           " bytes (1 label + 3072 pixel bytes per record), got ", size, " bytes: record ",
           size / uint64_t(kCifarRecordBytes), " is truncated after ",
           size % uint64_t(kCifarRecordBytes), " bytes");
  std::ifstream in(path, std::ios::binary);
  TS_CHECK(in.good(), "cifar10", path, ": cannot open the file");
  const int64_t records = int64_t(size / uint64_t(kCifarRecordBytes));
  const size_t pixel_base = pixels.size();
  pixels.resize(pixel_base + size_t(records * kCifarImageBytes));
  labels.reserve(labels.size() + size_t(records));
  for (int64_t r = 0; r < records; ++r) {
    char label = 0;
    in.read(&label, 1);
    in.read(reinterpret_cast<char*>(pixels.data() + pixel_base + size_t(r * kCifarImageBytes)),
            kCifarImageBytes);
    TS_CHECK(in.good(), "cifar10", path, ": read failed at record ", r);
    const int64_t value = int64_t(static_cast<uint8_t>(label));
    TS_CHECK(value < kCifarClasses, "cifar10", path, ": record ", r, " (byte offset ",
             r * kCifarRecordBytes, "): expected a label in 0..9, got ", value);
    labels.push_back(value);
  }
}

ImageDataset load_cifar10(const std::string& dir, Cifar10Split split) {
  const std::vector<std::string> names = cifar10_files(split);
  std::string missing;
  for (const std::string& name : names) {
    const fs::path p = fs::path(dir) / name;
    if (!fs::is_regular_file(p)) missing += (missing.empty() ? "" : ", ") + p.string();
  }
  TS_CHECK(missing.empty(), "cifar10", dir, ": missing ", missing, " (the CIFAR-10 binary version ",
           "holds data_batch_1.bin .. data_batch_5.bin and test_batch.bin)");
  std::vector<uint8_t> pixels;
  std::vector<int64_t> labels;
  for (const std::string& name : names)
    read_cifar10_file((fs::path(dir) / name).string(), pixels, labels);
  const std::string source =
      dir + (split == Cifar10Split::train ? " (CIFAR-10 train)" : " (CIFAR-10 test)");
  return ImageDataset(std::move(pixels), std::move(labels), 3, kCifarImageSize,
                      cifar10_class_names(), cifar10_norm(), source);
}

}  // namespace tessera::data

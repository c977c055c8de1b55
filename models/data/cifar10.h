// The CIFAR-10 binary format: data_batch_1.bin .. data_batch_5.bin (training) and test_batch.bin,
// each a sequence of 3073-byte records: 1 label byte (0..9), then 32x32 red, green and blue
// planes (1024 bytes each, row-major). Files are validated and loaded whole into memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/data/image_dataset.h"

namespace tessera::data {

constexpr int64_t kCifarImageSize = 32;
constexpr int64_t kCifarImageBytes = 3 * kCifarImageSize * kCifarImageSize;  // 3072
constexpr int64_t kCifarRecordBytes = 1 + kCifarImageBytes;                  // 3073
constexpr int64_t kCifarClasses = 10;

enum class Cifar10Split { train, test };

// "airplane", "automobile", ... "truck": the label order of the format.
const std::vector<std::string>& cifar10_class_names();
// The file names of a split, in reading order.
std::vector<std::string> cifar10_files(Cifar10Split split);

// Appends one file's records to pixels ((C, 32, 32) per image) and labels. Throws ValueError
// naming the file for a missing or unreadable file, an empty file, a size that is not a multiple
// of 3073 bytes, or a label outside 0..9 (naming the record and its byte offset).
void read_cifar10_file(const std::string& path, std::vector<uint8_t>& pixels,
                       std::vector<int64_t>& labels);

// The split's files under dir as (N, 3, 32, 32) images normalised with cifar10_norm(). Missing
// files are all named in one error.
ImageDataset load_cifar10(const std::string& dir, Cifar10Split split);

}  // namespace tessera::data

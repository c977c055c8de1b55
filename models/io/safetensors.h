// safetensors files, written from the format's spec: an 8-byte little-endian header length N, N
// bytes of UTF-8 JSON ({"name": {"dtype", "shape", "data_offsets": [begin, end]}, ...,
// "__metadata__": {string: string}}), then the raw little-endian tensor bytes, row-major, with
// offsets relative to the end of the header. Readers memory-map the file and validate every field.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace tessera::io {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using Metadata = std::map<std::string, std::string>;

// The spec's dtype names. Tessera computes in F32, F16, BF16, I32, I64 and BOOL; the others are
// read and validated (so foreign files open), but get() on them throws.
const char* safetensors_dtype_name(DType dtype);
// Bytes per element of a spec dtype name, or nullopt when the name is not in the spec.
std::optional<size_t> safetensors_dtype_size(const std::string& name);
// The Tessera dtype of a spec name, or nullopt for names Tessera has no type for (F64, U8, ...).
std::optional<DType> safetensors_to_dtype(const std::string& name);

// Writes `tensors` (any device, layout or dtype Tessera has) to `path`, atomically (temporary file,
// fsync, rename, directory fsync). Names must be unique, non-empty and not "__metadata__".
// Layout: tensors ordered by element size, largest first, then by name (as the reference
// implementation does), so every tensor's offset is a multiple of its element size; the header
// is padded with spaces so the data starts at a multiple of 8. The same input gives the same bytes.
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const Metadata& metadata = {});

// Throws ValueError naming `path_for_errors` unless every name is non-empty, unique, not
// "__metadata__", and every tensor is defined.
void validate_tensor_names(const NamedTensors& tensors, const std::string& path_for_errors);

// The serialized header (padded JSON, without the 8-byte length) and the tensors in file order;
// save_safetensors writes the length, this header, then the tensors' bytes.
struct SafetensorsLayout {
  std::string header;
  NamedTensors ordered;  // contiguous CPU tensors, file order
  uint64_t data_bytes = 0;
};
SafetensorsLayout plan_safetensors(const NamedTensors& tensors, const Metadata& metadata,
                                   const std::string& path_for_errors);

struct TensorInfo {
  std::string dtype;  // spec name, "F32"
  Shape shape;
  uint64_t begin = 0;  // data_offsets, relative to the start of the data buffer
  uint64_t end = 0;
};

// A memory-mapped, fully validated safetensors file. open() checks the header length, the JSON,
// every entry's dtype, shape and data_offsets (in range, numel * dtype size bytes, contiguous with
// no overlap or gap, covering the buffer) and the metadata; each failure throws ValueError
// "[safetensors] <path>: tensor '<name>': ...".
class SafetensorsFile {
 public:
  static constexpr uint64_t kMaxHeaderBytes = 100'000'000;

  static SafetensorsFile open(const std::string& path);

  const std::string& path() const { return path_; }
  // Tensor names in file order (by data offset).
  const std::vector<std::string>& names() const { return names_; }
  bool contains(const std::string& name) const { return infos_.count(name) != 0; }
  const Metadata& metadata() const { return metadata_; }
  // Throws naming the file when `name` is absent.
  const TensorInfo& info(const std::string& name) const;
  // A CPU tensor. It shares the mapping's pages (copy-on-write: writing to it never changes the
  // file, and the mapping lives while any tensor uses it) when its bytes are aligned to its
  // element size; otherwise it is a copy. Two get() calls for one name may alias each other:
  // clone() before writing if that matters. BOOL bytes other than 0 and 1 are an error.
  // The file must not be truncated in place while mapped (Tessera's writers replace files by
  // rename, which is safe); the mapping keeps the old contents alive.
  Tensor get(const std::string& name) const;
  // Every tensor, in file order (by data offset, not the order they were saved in).
  NamedTensors load_all() const;

 private:
  struct Mapping;
  std::string path_;
  std::shared_ptr<Mapping> mapping_;
  const uint8_t* data_ = nullptr;  // start of the tensor buffer inside the mapping
  std::vector<std::string> names_;
  std::map<std::string, TensorInfo> infos_;
  Metadata metadata_;
};

}  // namespace tessera::io

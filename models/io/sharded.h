// Sharded safetensors checkpoints in the Hugging Face layout: shards named
// "<prefix>-00001-of-00003.safetensors" and an index "<prefix>.safetensors.index.json" holding
// {"metadata": {"total_size": bytes, ...}, "weight_map": {tensor name: shard file name}}; and a
// reader that opens a single file, an index, or a directory holding either.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "models/io/safetensors.h"

namespace tessera::io {

struct ShardOptions {
  std::string prefix = "model";
  // A shard closes before the tensor that would take it past this size; a tensor larger than
  // this gets a shard of its own.
  uint64_t max_shard_bytes = uint64_t(5) << 30;
  // Stored in the index's "metadata" (beside total_size) and in each shard's __metadata__.
  Metadata metadata;
};

// Writes the shards (each atomically) and then the index (atomically, last), into `dir` (created
// if missing), tensors in the given order. Returns the index path. Shards of an earlier save with
// the same prefix that the new index does not name are removed after the index is written.
// The index is the commit point of one file, not of the set: to make the whole save atomic, write
// into a fresh directory and rename it (save_checkpoint does).
std::string save_sharded(const std::string& dir, const NamedTensors& tensors,
                         const ShardOptions& options = {});

// Tensors from one safetensors file or from the shards an index names, validated: the index must
// be well formed, name plain files in its own directory that exist and are valid safetensors, and
// every tensor it lists must be in its shard (and no shard may hold tensors the index does not
// list, or a tensor twice).
class SafetensorsReader {
 public:
  // `path`: a .safetensors file, an .index.json file, or a directory holding
  // "<prefix>.safetensors.index.json" or "<prefix>.safetensors".
  static SafetensorsReader open(const std::string& path, const std::string& prefix = "model");

  // Sorted.
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const { return where_.count(name) != 0; }
  const TensorInfo& info(const std::string& name) const;
  Tensor get(const std::string& name) const;
  NamedTensors load_all() const;
  // A single file's __metadata__, or an index's "metadata" (values as strings; total_size too).
  const Metadata& metadata() const { return metadata_; }
  // Which file holds `name`.
  const std::string& file_of(const std::string& name) const;

 private:
  const SafetensorsFile& file_for(const std::string& name) const;
  std::string origin_;  // what open() was given, for messages
  std::vector<SafetensorsFile> files_;
  std::map<std::string, size_t> where_;  // tensor name -> index into files_
  Metadata metadata_;
};

// Shorthand: every tensor of a file, index or directory.
NamedTensors load_sharded(const std::string& path, const std::string& prefix = "model");

}  // namespace tessera::io

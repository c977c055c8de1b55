// Sharded checkpoint directories: every rank writes the pieces it owns, in parallel, and loading
// under any layout reads only the pieces a rank needs (pieces.h holds the index arithmetic).
//
//   step-N/pieces-RRRRR.safetensors  one per writing rank R; each stored piece under the serial
//                                    name of its tensor (a rank stores at most one piece of one
//                                    tensor), flat (its stored elements in box order)
//   step-N/index.json                {"format": "tessera-pieces", "version": 1,
//                                     "files": {file: {"rank", "bytes", "checksum"}},
//                                     "tensors": {name: {"dtype", "shape": global, "pieces": [
//                                       {"file", "key", "view", "offsets", "shape",
//                                        "range": [b, e], "checksum"}]}}}
//   step-N/state.json                as checkpoint.h's, with "index": "index.json" for "files"
//
// Writing, all ranks into one temporary directory "<dir>.tmp-pieces": rank 0 prepares it, every
// rank writes its file and a small descriptor file "pieces-RRRRR.json", and after a barrier rank 0
// merges the descriptors into index.json (checking that every tensor's pieces tile it exactly),
// writes state.json last and renames the directory into place: it appears whole or not at all.
// The caller (the trainer) provides the barriers; this layer knows nothing of ranks' communication.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "models/io/pieces.h"

namespace tessera::io {

inline constexpr const char* kPieceIndexFile = "index.json";

// One piece a rank owns: `local` holds the box's range (range_numel() elements, any shape, dtype
// or device; padding elements are dropped on write).
struct PieceWrite {
  std::string name;
  PieceBox box;
  Tensor local;
};

// "<dir>.tmp-pieces": the temporary every rank writes into (remove_stale_temporaries clears one an
// interrupted save left).
std::string piece_temp_dir(const std::string& dir);
// Rank 0, before the others write: a fresh empty temporary (an earlier one is removed).
void begin_piece_directory(const std::string& dir);
// Every rank: its safetensors file (when it owns pieces) and its descriptor file, which carries
// `extra` (the caller's per-rank metadata) for rank 0.
void write_rank_pieces(const std::string& dir, int rank, const std::vector<PieceWrite>& pieces,
                       const nlohmann::json& extra = nlohmann::json::object());
// Rank 0, after every rank wrote: index.json from the `ranks` descriptor files (each tensor's
// pieces must tile it; a tensor two ranks stored, or one with a gap, is refused naming it), the
// files removed. Returns each rank's `extra`, by rank.
std::vector<nlohmann::json> merge_rank_pieces(const std::string& dir, int ranks);
// Rank 0, last: state.json ({"format": "tessera-checkpoint", "version": 1, "state": state,
// "index": "index.json"}), then the temporary renamed to `dir` (an existing one swapped out).
void commit_piece_directory(const std::string& dir, const nlohmann::json& state);
// Rank 0 on failure: removes the temporary.
void abandon_piece_directory(const std::string& dir) noexcept;

// Every tensor's pieces: checks a tensor's piece boxes tile its global shape exactly and names the
// tensor, the piece and the file when not.
void check_index(const nlohmann::json& index, const std::string& where);

struct StoredPiece {
  std::string file;  // file name inside the checkpoint directory
  std::string key;
  PieceBox box;
  std::string checksum;
  std::vector<Run> runs;
  std::string describe(size_t i) const;  // "piece 2 (key 'w', box ...) in pieces-00002.safetensors"
};

struct StoredTensor {
  std::string dtype;  // safetensors name, "F32"
  Shape shape;
  std::vector<StoredPiece> pieces;
};

// A sharded checkpoint's index, read and validated; tensors are read on demand from the pieces
// they meet, each piece's checksum verified on first use.
class PieceReader {
 public:
  static PieceReader open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }
  const StoredTensor& tensor(const std::string& name) const;
  // The target's range of `name` (target.range_numel() elements, flat, padding zero) in the stored
  // dtype, from only the pieces it meets. The target's global shape must be the stored one.
  Tensor read(const std::string& name, const PieceBox& target) const;
  // The whole serial tensor, its global shape.
  Tensor read_full(const std::string& name) const;
  // Every file's bytes and checksum, and every piece's checksum: the problems found, each naming
  // the tensor, the piece and the file (empty: intact).
  std::vector<std::string> verify_all() const;
  const nlohmann::json& files() const { return files_; }

 private:
  const Tensor& piece_data(const std::string& name, size_t i) const;
  std::string dir_;
  nlohmann::json files_;
  std::map<std::string, StoredTensor> tensors_;
  struct Cache;
  std::shared_ptr<Cache> cache_;
};

// True when `dir`'s state.json says it is a sharded checkpoint (it names an index).
bool is_piece_checkpoint(const std::string& dir);

}  // namespace tessera::io

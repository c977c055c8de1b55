// The trainer's checkpoint directory: model.safetensors (weights, serial names),
// optimizer.safetensors (optimizer state tensors) and state.json (step, schedule, loss scaler, RNG,
// data position, config, plus a manifest with each tensor's checksum). A directory appears complete
// or not at all. A sharded checkpoint (piece_checkpoint.h: per-rank piece files and an index in
// place of the two files) is read by the same load_checkpoint.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "models/io/safetensors.h"

namespace tessera::io {

struct CheckpointContents {
  NamedTensors model;
  NamedTensors optimizer;
  // Whatever else resuming needs; the trainer owns its schema (a JSON object).
  nlohmann::json state = nlohmann::json::object();
};

struct CheckpointLoadOptions {
  // Recompute every tensor's checksum and compare with the manifest (one pass over the bytes):
  // catches bit flips the structural checks of the safetensors reader cannot see.
  bool verify_checksums = true;
  // Read optimizer.safetensors too (eval and generate need only the weights and the state).
  bool load_optimizer = true;
};

// Writes the three files into a fresh sibling "<dir>.tmp-XXXXXX" (each file fsynced, state.json
// last), then renames that directory to `dir` (atomically swapping out an existing `dir`, whose
// old contents are then deleted) and fsyncs the parent. A crash or exception at any point leaves
// either the old `dir` or the new one, and an exception removes the temporary directory.
void save_checkpoint(const std::string& dir, const CheckpointContents& contents);

// Reads and validates a checkpoint (tensors come back in file order, as CPU tensors over the
// files' mappings; see SafetensorsFile::get): state.json's format and manifest, both safetensors
// files (every header field), the tensor names against the manifest and, by default, each tensor's
// checksum. Failures throw ValueError "[checkpoint] <file>: tensor '<name>': ...".
CheckpointContents load_checkpoint(const std::string& dir,
                                   const CheckpointLoadOptions& options = {});

// A sharded checkpoint (piece_checkpoint.h; state.json names an index instead of the two files)
// loads the same way: its tensors consolidated from their pieces, the optimizer's under their
// "optim/<state>/<parameter>" names, each piece's checksum verified as it is read.

// Just state.json's "state" object (validated as load_checkpoint does): a sharded resume reads
// the tensors it needs itself.
nlohmann::json load_checkpoint_state(const std::string& dir);

// "<root>/step-00000100": the directory name latest_checkpoint() looks for.
std::string checkpoint_dir(const std::string& root, int64_t step);

struct CheckpointEntry {
  int64_t step = 0;
  std::string path;  // "<root>/step-<digits>"
};

// The "step-<digits>" directories under `root`, by step (none when root is missing). Temporaries
// of interrupted saves ("step-N.tmp-*", "step-N.old-*") are not checkpoints and are not listed.
std::vector<CheckpointEntry> list_checkpoints(const std::string& root);

// The checkpoint with the highest step under `root`, or nullopt when there is none (or no root).
// A latest checkpoint whose state.json is missing or not a checkpoint manifest throws ValueError
// naming the file: falling back to an older step silently would resume the wrong run (the caller
// may still pick an earlier step explicitly).
std::optional<std::string> latest_checkpoint(const std::string& root);

// Deletes the temporaries interrupted saves left under `root` ("step-N.tmp-*", "step-N.old-*";
// each may hold a whole model and optimizer) and returns their paths. Call it only while no other
// process writes checkpoints under root (hold its DirectoryLock).
std::vector<std::string> remove_stale_temporaries(const std::string& root);

// 64-bit checksum of a byte range (not cryptographic; detects corruption), as 16 hex digits.
std::string checksum_hex(const void* data, size_t nbytes);

}  // namespace tessera::io

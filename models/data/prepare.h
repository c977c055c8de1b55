// Text files -> token files: streams each input through a tokenizer into a training token file
// and optionally a validation file holding the tail of the input. The engine of
// `tessera data prepare` (tools/data/prepare_main.cc).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "models/data/tokenizer.h"

namespace tessera::data {

struct PrepareOptions {
  std::vector<std::string> inputs = {};  // text files, tokenised in order
  std::string output = {};               // the training token file
  TokenizerSpec tokenizer = {};
  // The last val_fraction of the input bytes (cut at the last safe point at or before that byte)
  // goes to val_output_path(output) instead. 0 writes no validation file.
  double val_fraction = 0.0;
  // Append the end-of-text token after each input file (tokenizers that have one: gpt2).
  bool append_end_of_text = false;
  std::ostream* progress = nullptr;  // the progress bar's stream, e.g. &std::cerr; null: silent
  // Read size, and how much text without a safe cut point may pile up before it is cut anyway at
  // a character boundary (which may split one pre-token differently from whole-file encoding).
  size_t chunk_bytes = size_t(1) << 20;
  size_t max_pending_bytes = size_t(64) << 20;
};

struct PrepareResult {
  std::string train_path, val_path;  // val_path empty without a validation split
  uint64_t train_tokens = 0, val_tokens = 0;
  uint64_t input_bytes = 0;
  int64_t vocab_size = 0;
  double seconds = 0.0;
};

// "out.tok" -> "out.val.tok"; other names get ".val.tok" appended.
std::string val_output_path(const std::string& output);

// Throws ValueError naming the file for a missing or unreadable input, an empty input set, an
// output (or validation output) that is one of the inputs (also through a link), val_fraction
// outside [0, 1), a split that leaves either file empty, or end-of-text requested
// from a tokenizer without one; nothing is left at the output paths then.
PrepareResult prepare_token_files(const PrepareOptions& options);

}  // namespace tessera::data

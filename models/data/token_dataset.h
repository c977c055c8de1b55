// Language-model training windows from one token file: each window is T + 1 consecutive tokens,
// split into an input (the first T) and a target (the last T, the input shifted by one). Order,
// sharding and resume come from Sampler (sampler.h).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/tensor.h"
#include "models/data/sampler.h"
#include "models/data/token_file.h"

namespace tessera::data {

struct TokenDatasetOptions {
  int64_t context = 0;  // T, tokens per input row
  // Distance between window starts; 0 means T, so consecutive inputs tile the file without
  // overlap (each window's last token is the next window's first).
  int64_t stride = 0;
  bool shuffle = true;
  uint64_t seed = 0;
  int64_t rank = 0;
  int64_t world_size = 1;
  bool verify_file = true;  // TokenFileOpenOptions::verify
  // The file's format, and for llmc / u16 (which record none) the vocab size its ids must be
  // below: TokenFileOpenOptions::format and vocab_size.
  TokenFormat format = TokenFormat::tessera;
  uint64_t vocab_size = 0;
};

struct TokenBatch {
  Tensor input;   // (B, T) i64
  Tensor target;  // (B, T) i64: target[b, t] = input[b, t + 1] within the window
};

class TokenDataset {
 public:
  // Throws ValueError for a bad file (see TokenFile::open), context < 1, stride < 0, or a file
  // with fewer than T + 1 tokens.
  TokenDataset(const std::string& path, const TokenDatasetOptions& options);
  TokenDataset(TokenFile file, const TokenDatasetOptions& options);

  // This rank's next batch_size windows (sampler.h says which).
  TokenBatch next_batch(int64_t batch_size);
  // Window w: tokens [w * stride, w * stride + T + 1) of the file, into out (size T + 1).
  void read_window(int64_t window, std::span<int64_t> out) const;

  int64_t num_windows() const { return sampler_.num_items(); }
  int64_t context() const { return context_; }
  int64_t stride() const { return stride_; }
  uint64_t vocab_size() const { return file_.vocab_size(); }
  const TokenFile& file() const { return file_; }
  const DataPosition& position() const { return sampler_.position(); }
  void set_position(const DataPosition& position) { sampler_.set_position(position); }

 private:
  static int64_t count_windows(const TokenFile& file, const TokenDatasetOptions& options);

  TokenFile file_;
  int64_t context_;
  int64_t stride_;
  Sampler sampler_;
};

}  // namespace tessera::data

// Language-model windows for the GPT and BERT trainers from either a token file (models/data's
// TokenDataset) or tokens held in memory (the built-in grammar text), with the same sampling,
// rank sharding and resumable position (data::Sampler) either way.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "models/data/sampler.h"
#include "models/data/token_dataset.h"

namespace tessera::train {

struct LmSourceOptions {
  int64_t context = 0;  // T
  bool shuffle = true;
  uint64_t seed = 0;
  int64_t rank = 0;  // among the data-parallel ranks
  int64_t world_size = 1;
};

struct LmBatch {
  Tensor input;   // (B, T) i64
  Tensor target;  // (B, T) i64, input shifted by one
  // Stream index of this rank's first row (the same row has the same index on any layout).
  int64_t first_item = 0;
};

class LmSource {
 public:
  // Windows of T + 1 tokens of a token file; errors name the file.
  static std::unique_ptr<LmSource> from_file(const std::string& path,
                                             const LmSourceOptions& options);
  // Windows of T + 1 tokens of `tokens` (ids below vocab_size), tiled with stride T.
  static std::unique_ptr<LmSource> from_tokens(std::vector<int64_t> tokens, int64_t vocab_size,
                                               const LmSourceOptions& options);

  // This rank's next batch_size windows.
  LmBatch next(int64_t batch_size);
  int64_t vocab_size() const { return vocab_size_; }
  int64_t num_windows() const;
  data::DataPosition position() const;
  void set_position(const data::DataPosition& position);

 private:
  LmSource() = default;

  LmSourceOptions options_;
  int64_t vocab_size_ = 0;
  std::optional<data::TokenDataset> file_;
  std::vector<int64_t> tokens_;
  std::optional<data::Sampler> sampler_;  // for tokens_
};

}  // namespace tessera::train

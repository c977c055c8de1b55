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
#include "models/train/train_config.h"

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
  // Windows of T + 1 tokens of a token file (of file.format: ours, llm.c's or nanoGPT's);
  // errors name the file.
  static std::unique_ptr<LmSource> from_file(const std::string& path,
                                             const LmSourceOptions& options,
                                             const data::TokenFileOpenOptions& file = {});
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

// The windows a language-model task trains and evaluates on: data.path / data.val_path (in
// data.format, llmc and u16 files read against data.vocab_size), or, when
// no path is given, the built-in grammar text (separate seeds for the training and held-out text,
// the same for GPT and BERT). val is null for a file without data.val_path. val never shuffles.
struct LmSources {
  std::unique_ptr<LmSource> train, val;
};
LmSources make_lm_sources(const DataSection& data, const LmSourceOptions& train_options);

}  // namespace tessera::train

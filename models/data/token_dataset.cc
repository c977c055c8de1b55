// Training windows over a memory-mapped token file (see token_dataset.h).
#include "models/data/token_dataset.h"

#include <vector>

#include "core/error.h"
#include "core/factory.h"

namespace tessera::data {

int64_t TokenDataset::count_windows(const TokenFile& file, const TokenDatasetOptions& options) {
  TS_CHECK(options.context >= 1 && options.stride >= 0, "token_dataset",
           "expected context >= 1 and stride >= 0, got context ", options.context, " and stride ",
           options.stride);
  const int64_t stride = options.stride == 0 ? options.context : options.stride;
  const int64_t tokens = int64_t(file.size());
  TS_CHECK(tokens >= options.context + 1, "token_dataset",
           "expected at least context + 1 = ", options.context + 1, " tokens in '", file.path(),
           "', got ", tokens);
  return (tokens - (options.context + 1)) / stride + 1;
}

TokenDataset::TokenDataset(const std::string& path, const TokenDatasetOptions& options)
    : TokenDataset(TokenFile::open(path, {.verify = options.verify_file,
                                          .format = options.format,
                                          .vocab_size = options.vocab_size}),
                   options) {}

TokenDataset::TokenDataset(TokenFile file, const TokenDatasetOptions& options)
    : file_(std::move(file)),
      context_(options.context),
      stride_(options.stride == 0 ? options.context : options.stride),
      sampler_(count_windows(file_, options), SamplerOptions{.shuffle = options.shuffle,
                                                             .seed = options.seed,
                                                             .rank = options.rank,
                                                             .world_size = options.world_size}) {}

void TokenDataset::read_window(int64_t window, std::span<int64_t> out) const {
  TS_CHECK(window >= 0 && window < num_windows() && int64_t(out.size()) == context_ + 1,
           "token_dataset", "expected a window in [0, ", num_windows(), ") and ", context_ + 1,
           " output slots, got window ", window, " and ", out.size(), " slots");
  file_.read(uint64_t(window * stride_), out);
}

TokenBatch TokenDataset::next_batch(int64_t batch_size) {
  const std::vector<int64_t> windows = sampler_.next(batch_size);
  const int64_t T = context_;
  TokenBatch batch{empty({batch_size, T}, {.dtype = DType::i64}),
                   empty({batch_size, T}, {.dtype = DType::i64})};
  int64_t* input = batch.input.data<int64_t>();    // (B, T)
  int64_t* target = batch.target.data<int64_t>();  // (B, T)
  std::vector<int64_t> row(size_t(T + 1));
  for (int64_t b = 0; b < batch_size; ++b) {
    read_window(windows[size_t(b)], row);
    std::copy(row.begin(), row.end() - 1, input + b * T);
    std::copy(row.begin() + 1, row.end(), target + b * T);
  }
  return batch;
}

}  // namespace tessera::data

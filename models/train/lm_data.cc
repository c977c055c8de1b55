// Language-model windows from a token file or from memory (see lm_data.h).
#include "models/train/lm_data.h"

#include <algorithm>

#include "core/error.h"
#include "core/factory.h"
#include "core/profiler.h"
#include "models/train/synthetic_data.h"

namespace tessera::train {

std::unique_ptr<LmSource> LmSource::from_file(const std::string& path, const LmSourceOptions& o,
                                              const data::TokenFileOpenOptions& file) {
  std::unique_ptr<LmSource> s(new LmSource());
  s->options_ = o;
  data::TokenDatasetOptions d;
  d.context = o.context;
  d.shuffle = o.shuffle;
  d.seed = o.seed;
  d.rank = o.rank;
  d.world_size = o.world_size;
  s->file_.emplace(data::TokenFile::open(path, file), d);
  s->vocab_size_ = int64_t(s->file_->vocab_size());
  return s;
}

std::unique_ptr<LmSource> LmSource::from_tokens(std::vector<int64_t> tokens, int64_t vocab_size,
                                                const LmSourceOptions& o) {
  TS_CHECK(o.context > 0 && int64_t(tokens.size()) > o.context, "LmSource",
           "expected more than context ", o.context, " tokens, got ", tokens.size());
  std::unique_ptr<LmSource> s(new LmSource());
  s->options_ = o;
  s->vocab_size_ = vocab_size;
  s->tokens_ = std::move(tokens);
  const int64_t windows = (int64_t(s->tokens_.size()) - 1) / o.context;
  s->sampler_.emplace(
      windows,
      data::SamplerOptions{
          .shuffle = o.shuffle, .seed = o.seed, .rank = o.rank, .world_size = o.world_size});
  return s;
}

LmBatch LmSource::next(int64_t batch_size) {
  TS_PROFILE("data", "step");
  const data::DataPosition before = position();
  const int64_t per_epoch = num_windows();
  LmBatch out;
  out.first_item = before.epoch * per_epoch + before.index + options_.rank * batch_size;
  if (file_) {
    data::TokenBatch b = file_->next_batch(batch_size);
    out.input = b.input;
    out.target = b.target;
    return out;
  }
  const std::vector<int64_t> windows = sampler_->next(batch_size);
  const int64_t T = options_.context;
  out.input = empty({batch_size, T}, {.dtype = DType::i64});
  out.target = empty({batch_size, T}, {.dtype = DType::i64});
  int64_t* x = out.input.data<int64_t>();   // (B, T)
  int64_t* y = out.target.data<int64_t>();  // (B, T)
  for (int64_t b = 0; b < batch_size; ++b) {
    const int64_t* w = tokens_.data() + windows[size_t(b)] * T;
    std::copy(w, w + T, x + b * T);
    std::copy(w + 1, w + T + 1, y + b * T);
  }
  return out;
}

int64_t LmSource::num_windows() const {
  return file_ ? file_->num_windows() : sampler_->num_items();
}

data::DataPosition LmSource::position() const {
  return file_ ? file_->position() : sampler_->position();
}

void LmSource::set_position(const data::DataPosition& p) {
  if (file_)
    file_->set_position(p);
  else
    sampler_->set_position(p);
}

namespace {

// The built-in text's seeds: fixed, so every run (whatever train.seed) sees the same data.
constexpr uint64_t kTrainTextSeed = 0x7E55E1A;
constexpr uint64_t kValTextSeed = 0x7E55E1B;

std::vector<int64_t> bytes_to_ids(const std::string& text) {
  std::vector<int64_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = int64_t(static_cast<unsigned char>(text[i]));
  return ids;
}

}  // namespace

LmSources make_lm_sources(const DataSection& data, const LmSourceOptions& train_options) {
  LmSourceOptions val_options = train_options;
  val_options.shuffle = false;
  LmSources s;
  if (data.path.empty()) {
    s.train = LmSource::from_tokens(
        bytes_to_ids(generate_grammar_text(kTrainTextSeed, data.builtin_tokens)), 256,
        train_options);
    s.val = LmSource::from_tokens(
        bytes_to_ids(generate_grammar_text(kValTextSeed, data.builtin_val_tokens)), 256,
        val_options);
  } else {
    const data::TokenFileOpenOptions file{.format = data::parse_token_format(data.format),
                                          .vocab_size = uint64_t(data.vocab_size)};
    s.train = LmSource::from_file(data.path, train_options, file);
    if (!data.val_path.empty()) s.val = LmSource::from_file(data.val_path, val_options, file);
  }
  return s;
}

}  // namespace tessera::train

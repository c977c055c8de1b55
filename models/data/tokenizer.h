// The tokenizer interface shared by the byte-level and GPT-2 BPE tokenizers, and a factory that
// builds one from its name and files (what `prepare`, the trainers and generation use).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::data {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  virtual std::string name() const = 0;
  // One more than the largest id encode() can return and decode() accepts.
  virtual int64_t vocab_size() const = 0;
  // Appends the ids of `text` (any bytes; invalid UTF-8 included) to `out`.
  virtual void encode(std::string_view text, std::vector<uint32_t>& out) const = 0;
  std::vector<uint32_t> encode(std::string_view text) const;
  // The exact inverse of encode(); throws ValueError on an id outside the vocabulary.
  virtual std::string decode(std::span<const uint32_t> ids) const = 0;
  // The largest p <= text.size() such that encode(text[0, p)) followed by encode of the rest
  // equals encode(text) whatever text continues with: where streaming input may be cut. 0 when
  // no such cut is known.
  virtual size_t safe_split(std::string_view text) const = 0;
  // The id that separates documents (GPT-2's <|endoftext|>), when the vocabulary has one.
  virtual std::optional<uint32_t> end_of_text() const { return std::nullopt; }
};

struct TokenizerSpec {
  std::string kind = "byte";     // "byte" or "gpt2"
  std::string vocab_path = {};   // gpt2: vocab.json
  std::string merges_path = {};  // gpt2: merges.txt
};

// Throws ValueError for an unknown kind, missing paths, or bad vocab/merges files.
std::unique_ptr<Tokenizer> make_tokenizer(const TokenizerSpec& spec);

}  // namespace tessera::data

// The byte-level tokenizer: each byte is its own token (vocabulary of 256), so any byte string
// round-trips exactly and every cut point is safe.
#pragma once

#include "models/data/tokenizer.h"

namespace tessera::data {

class ByteTokenizer final : public Tokenizer {
 public:
  std::string name() const override { return "byte"; }
  int64_t vocab_size() const override { return 256; }
  using Tokenizer::encode;
  void encode(std::string_view text, std::vector<uint32_t>& out) const override;
  std::string decode(std::span<const uint32_t> ids) const override;
  size_t safe_split(std::string_view text) const override { return text.size(); }
};

}  // namespace tessera::data

// Byte-level tokenizer (see byte_tokenizer.h).
#include "models/data/byte_tokenizer.h"

#include "core/error.h"

namespace tessera::data {

void ByteTokenizer::encode(std::string_view text, std::vector<uint32_t>& out) const {
  out.reserve(out.size() + text.size());
  for (char c : text) out.push_back(static_cast<unsigned char>(c));
}

std::string ByteTokenizer::decode(std::span<const uint32_t> ids) const {
  std::string out;
  out.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    TS_CHECK(ids[i] < 256, "byte_tokenizer.decode",
             "expected ids below the vocabulary size 256, got ", ids[i], " at position ", i);
    out.push_back(static_cast<char>(ids[i]));
  }
  return out;
}

}  // namespace tessera::data

// Tokenizer helpers and the factory (see tokenizer.h).
#include "models/data/tokenizer.h"

#include "core/error.h"
#include "models/data/bpe_tokenizer.h"
#include "models/data/byte_tokenizer.h"

namespace tessera::data {

std::vector<uint32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<uint32_t> ids;
  encode(text, ids);
  return ids;
}

std::unique_ptr<Tokenizer> make_tokenizer(const TokenizerSpec& spec) {
  if (spec.kind == "byte") return std::make_unique<ByteTokenizer>();
  if (spec.kind == "gpt2") {
    TS_CHECK(!spec.vocab_path.empty() && !spec.merges_path.empty(), "tokenizer",
             "expected vocab.json and merges.txt paths for the gpt2 tokenizer, got vocab '",
             spec.vocab_path, "' and merges '", spec.merges_path, "'");
    return std::make_unique<BpeTokenizer>(
        BpeTokenizer::from_files(spec.vocab_path, spec.merges_path));
  }
  TS_FAIL("tokenizer", "expected tokenizer 'byte' or 'gpt2', got '", spec.kind, "'");
}

}  // namespace tessera::data

// The byte-level tokenizer and the tokenizer factory.
#include "models/data/byte_tokenizer.h"

#include <catch2/catch.hpp>

#include "core/error.h"

using namespace tessera;
using namespace tessera::data;

TEST_CASE("byte tokenizer round-trips arbitrary bytes", "[tokenizer]") {
  const ByteTokenizer tok;
  CHECK(tok.vocab_size() == 256);
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(char(b));
  const std::string samples[] = {"", "hello", all, std::string("\0\xff\x80 z", 5),
                                 "caf\xc3\xa9 \xe4\xb8\xad"};
  for (const std::string& s : samples) {
    const std::vector<uint32_t> ids = tok.encode(s);
    REQUIRE(ids.size() == s.size());
    for (size_t i = 0; i < s.size(); ++i)
      REQUIRE(ids[i] == uint32_t(static_cast<unsigned char>(s[i])));
    REQUIRE(tok.decode(ids) == s);
    REQUIRE(tok.safe_split(s) == s.size());
  }
  CHECK_FALSE(tok.end_of_text().has_value());
  const std::vector<uint32_t> bad = {65, 256};
  REQUIRE_THROWS_WITH(tok.decode(bad), Catch::Contains("got 256 at position 1"));
}

TEST_CASE("tokenizer factory", "[tokenizer]") {
  CHECK(make_tokenizer({.kind = "byte"})->name() == "byte");
  REQUIRE_THROWS_WITH(make_tokenizer({.kind = "sentencepiece"}),
                      Catch::Contains("expected tokenizer 'byte' or 'gpt2', got 'sentencepiece'"));
  REQUIRE_THROWS_WITH(make_tokenizer({.kind = "gpt2"}),
                      Catch::Contains("vocab.json and merges.txt paths"));
}

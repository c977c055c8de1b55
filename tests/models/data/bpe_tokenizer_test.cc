// GPT-2 BPE against the Python reference (fixtures from gen_bpe_fixtures.py): pre-tokenisation
// pieces and ids on fixed and random texts, exact decoding, and every malformed-file message.
#include "models/data/bpe_tokenizer.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "models/data/pretokenize.h"
#include "models/data/unicode.h"
#include "tests/models/data/data_test_util.h"

using namespace tessera;
using namespace tessera::data;
using tessera::data::testing::fixture;
using tessera::data::testing::read_file;

namespace {

const nlohmann::json& cases() {
  static const nlohmann::json j = nlohmann::json::parse(read_file(fixture("bpe_cases.json")));
  return j;
}

const BpeTokenizer& tiny() {
  static const BpeTokenizer tok =
      BpeTokenizer::from_files(fixture("vocab.json"), fixture("merges.txt"));
  return tok;
}

std::vector<std::string> pieces(std::string_view text) {
  std::vector<std::string> out;
  gpt2_pretokenize(text, [&](std::string_view p) { out.emplace_back(p); });
  return out;
}

// The vocab and merges fixtures with `edit` applied to merges.txt's text.
BpeTokenizer with_merges(const std::string& merges) {
  return BpeTokenizer::from_strings(read_file(fixture("vocab.json")), merges);
}

}  // namespace

TEST_CASE("GPT-2 pre-tokenisation matches the reference pattern", "[bpe]") {
  REQUIRE(cases().at("cases").size() > 300);
  for (const auto& c : cases().at("cases")) {
    const std::string text = c.at("text");
    INFO("text: " << nlohmann::json(text).dump());
    REQUIRE(pieces(text) == c.at("pieces").get<std::vector<std::string>>());
  }
}

TEST_CASE("BPE ids match the reference encoder", "[bpe]") {
  const BpeTokenizer& tok = tiny();
  CHECK(tok.vocab_size() == cases().at("vocab_size").get<int64_t>());
  CHECK(tok.merge_count() == cases().at("merges").get<size_t>());
  for (const auto& c : cases().at("cases")) {
    const std::string text = c.at("text");
    INFO("text: " << nlohmann::json(text).dump());
    REQUIRE(tok.encode(text) == c.at("ids").get<std::vector<uint32_t>>());
    REQUIRE(tok.encode(text) == c.at("ids").get<std::vector<uint32_t>>());  // again, from the cache
    REQUIRE(tok.decode(c.at("ids").get<std::vector<uint32_t>>()) == text);
  }
}

TEST_CASE("BPE merge order follows ranks even when merges are not in training order", "[bpe]") {
  const BpeTokenizer tok =
      BpeTokenizer::from_files(fixture("vocab.json"), fixture("merges_shuffled.txt"));
  int differing = 0;
  for (const auto& c : cases().at("cases")) {
    const std::string text = c.at("text");
    INFO("text: " << nlohmann::json(text).dump());
    REQUIRE(tok.encode(text) == c.at("ids_shuffled").get<std::vector<uint32_t>>());
    differing += c.at("ids_shuffled") != c.at("ids");
  }
  CHECK(differing > 0);  // the shuffled ranks really change some encodings
}

TEST_CASE("BPE by hand on a four-merge vocabulary", "[bpe]") {
  // Bytes keep GPT-2's ids (printable ones first: 'a' is 64, ' ' is 220 as Ġ); merges build
  // "ab", "Ġab" and "abab" from them.
  nlohmann::json vocab;
  const auto& byte_cp = gpt2_byte_to_code_point();
  std::vector<uint32_t> order(256);
  for (uint32_t b = 0; b < 256; ++b) order[b] = b;
  std::stable_sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) {
    return (byte_cp[x] >= 256) < (byte_cp[y] >= 256);
  });
  for (uint32_t i = 0; i < 256; ++i) {
    std::string s;
    append_utf8(s, byte_cp[order[i]]);
    vocab[s] = i;
  }
  vocab["ab"] = 256;
  vocab["Ġab"] = 257;
  vocab["abab"] = 258;
  vocab["Ġa"] = 259;
  const BpeTokenizer tok =
      BpeTokenizer::from_strings(vocab.dump(), "#version: 0.2\na b\nĠ ab\nab ab\nĠ a\n");
  CHECK(tok.encode("ab") == std::vector<uint32_t>{256});
  CHECK(tok.encode("abab") == std::vector<uint32_t>{258});
  CHECK(tok.encode("ababab") == std::vector<uint32_t>{258, 256});  // left to right
  CHECK(tok.encode(" ab") == std::vector<uint32_t>{257});          // rank 1 beats "Ġ a" (rank 3)
  CHECK(tok.encode(" aab") == std::vector<uint32_t>{259, 256});    // "a b" first, then "Ġ a"
  CHECK(tok.encode("ba!") == std::vector<uint32_t>{65, 64, 0});
  CHECK(tok.decode(std::vector<uint32_t>{257, 258, 0}) == " ababab!");

  // A merge ranked before the merge that creates its left part ("ab a" before "a b"): the
  // reference merges every "a b" of the word before it looks at new pairs, so "abab" stays two
  // "ab" (gen_bpe_fixtures.bpe gives ['ab', 'ab']), where merging one pair at a time would give
  // "aba" + "b".
  vocab["aba"] = 260;
  const BpeTokenizer early = BpeTokenizer::from_strings(vocab.dump(), "ab a\na b\n");
  CHECK(early.encode("abab") == std::vector<uint32_t>{256, 256});
  CHECK(early.encode("ababab") == std::vector<uint32_t>{256, 256, 256});
  CHECK(early.encode("aab") == std::vector<uint32_t>{64, 256});
}

TEST_CASE("BPE round-trips bytes that are not valid UTF-8", "[bpe]") {
  const BpeTokenizer& tok = tiny();
  const std::string samples[] = {std::string("\xff\xfe the \x80\x80 then", 15),
                                 "caf\xc3",
                                 "\xe4\xb8",
                                 "\xed\xa0\x80 surrogate",
                                 "\xc0\xaf overlong",
                                 std::string("nul\0byte", 8)};
  for (const std::string& s : samples) {
    const std::vector<uint32_t> ids = tok.encode(s);
    REQUIRE(tok.decode(ids) == s);
  }
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(char(b));
  CHECK(tok.decode(tok.encode(all)) == all);
}

TEST_CASE("BPE: end of text, decode errors, and the safe split point", "[bpe]") {
  const BpeTokenizer& tok = tiny();
  REQUIRE(tok.end_of_text().has_value());
  CHECK(*tok.end_of_text() == uint32_t(tok.vocab_size() - 1));
  CHECK(tok.decode(std::vector<uint32_t>{*tok.end_of_text()}) == "<|endoftext|>");
  const std::vector<uint32_t> unknown = {64, uint32_t(tok.vocab_size())};
  REQUIRE_THROWS_WITH(tok.decode(unknown), Catch::Contains("got 377 at position 1"));
  // Cutting at safe_split and encoding the halves apart gives the whole text's ids.
  for (const auto& c : cases().at("cases")) {
    const std::string text = c.at("text");
    const size_t p = tok.safe_split(text);
    std::vector<uint32_t> ids = tok.encode(std::string_view(text).substr(0, p));
    tok.encode(std::string_view(text).substr(p), ids);
    REQUIRE(ids == c.at("ids").get<std::vector<uint32_t>>());
  }
  CHECK(tok.safe_split("hello world again") == 11);
  CHECK(tok.safe_split("hello,  world") == 0);
}

TEST_CASE("BPE: malformed vocab.json and merges.txt name the file and line", "[bpe]") {
  const std::string vocab = read_file(fixture("vocab.json"));
  const std::string merges = read_file(fixture("merges.txt"));
  REQUIRE_THROWS_WITH(BpeTokenizer::from_files("/no/such/vocab.json", fixture("merges.txt")),
                      Catch::Contains("/no/such/vocab.json") && Catch::Contains("No such file"));
  REQUIRE_THROWS_WITH(BpeTokenizer::from_files(fixture("vocab.json"), "/no/such/merges.txt"),
                      Catch::Contains("/no/such/merges.txt"));
  REQUIRE_THROWS_WITH(BpeTokenizer::from_strings("{\n\"a\": 1,\n\"b\": }", merges, "v.json"),
                      Catch::Contains("v.json") && Catch::Contains("line 3"));
  REQUIRE_THROWS_WITH(BpeTokenizer::from_strings("[1, 2]", merges, "v.json"),
                      Catch::Contains("JSON object of token -> id in 'v.json', got a array"));
  REQUIRE_THROWS_WITH(
      BpeTokenizer::from_strings("{\"a\": -1}", merges, "v.json"),
      Catch::Contains("token 'a' to map to an integer id") && Catch::Contains("got -1"));
  REQUIRE_THROWS_WITH(BpeTokenizer::from_strings("{\"a\": 1, \"b\": 1}", merges, "v.json"),
                      Catch::Contains("id 1 for both 'a' and 'b'"));
  REQUIRE_THROWS_WITH(BpeTokenizer::from_strings("{\"a\": 0, \"b\": 1}", merges, "v.json"),
                      Catch::Contains("a token for every byte, got none for byte 0 ('Ā')"));
  REQUIRE_THROWS_WITH(
      with_merges(merges + "onlyone\n"),
      Catch::Contains(
          "'merges.txt' line 122: expected two tokens separated by one space, got 'onlyone'"));
  REQUIRE_THROWS_WITH(with_merges("#version: 0.2\nh e\na  b\n"),
                      Catch::Contains("line 3: expected two tokens"));
  REQUIRE_THROWS_WITH(with_merges("#version: 0.2\nh e\nx yz\n"),
                      Catch::Contains("line 3: expected token 'yz' to be in 'vocab.json'"));
  REQUIRE_THROWS_WITH(with_merges("q z\n"), Catch::Contains("line 1: expected merged token 'qz'"));
  REQUIRE_THROWS_WITH(
      with_merges("h e\n\nh e\n"),
      Catch::Contains("line 3: expected each merge once, got 'h e' again (first on line 1)"));
  // Windows line ends and a missing final newline are fine.
  const BpeTokenizer crlf = with_merges("#version: 0.2\r\nh e\r\nl l");
  CHECK(crlf.merge_count() == 2);
}

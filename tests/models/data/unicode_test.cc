// UTF-8 decoding, the Unicode classes of the GPT-2 pattern, and GPT-2's byte alphabet.
#include "models/data/unicode.h"

#include <catch2/catch.hpp>
#include <set>

using namespace tessera::data;

TEST_CASE("UTF-8 decode and encode round trip, invalid sequences are single bytes", "[unicode]") {
  for (uint32_t cp : {0x0u, 0x41u, 0x7Fu, 0x80u, 0x7FFu, 0x800u, 0xFFFFu, 0x10000u, 0x10FFFFu}) {
    std::string s;
    append_utf8(s, cp);
    uint32_t back;
    REQUIRE(decode_utf8(s, 0, &back) == s.size());
    REQUIRE(back == cp);
  }
  const std::string invalid[] = {
      "\x80", "\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80",
      "\xc3", "\xe4\xb8", "\xff",         "\xc3("};
  for (const std::string& s : invalid) {
    uint32_t cp;
    REQUIRE(decode_utf8(s, 0, &cp) == 1);
    REQUIRE(cp == kInvalidCodePoint);
  }
}

TEST_CASE("letter, number and space classes", "[unicode]") {
  // ASCII and Latin-1 exactly.
  for (uint32_t c = 0; c < 0x100; ++c) {
    const bool letter = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == 0xAA ||
                        c == 0xB5 || c == 0xBA || (c >= 0xC0 && c != 0xD7 && c != 0xF7);
    const bool number =
        (c >= '0' && c <= '9') || c == 0xB2 || c == 0xB3 || c == 0xB9 || (c >= 0xBC && c <= 0xBE);
    const bool space = (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0;
    INFO("code point " << c);
    REQUIRE(is_letter(c) == letter);
    REQUIRE(is_number(c) == number);
    REQUIRE(is_space(c) == space);
  }
  CHECK(is_letter(0x4E2D));         // 中
  CHECK(is_letter(0x0416));         // Ж
  CHECK(is_letter(0x3B1));          // α
  CHECK_FALSE(is_letter(0x0301));   // combining acute: a mark, not a letter
  CHECK_FALSE(is_letter(0x1F600));  // emoji
  CHECK(is_number(0x2167));         // Roman numeral eight (Nl)
  CHECK(is_number(0x0663));         // Arabic-Indic three (Nd)
  CHECK(is_number(0xFF11));         // fullwidth one
  CHECK(is_space(0x3000));
  CHECK(is_space(0x2028));
  CHECK_FALSE(is_space(0x1C));
  CHECK_FALSE(is_space(0x200B));  // zero width space is not White_Space
  CHECK_FALSE(is_letter(kInvalidCodePoint));
  CHECK_FALSE(is_number(kInvalidCodePoint));
}

TEST_CASE("GPT-2 byte alphabet is a bijection onto printable code points", "[unicode]") {
  const auto& table = gpt2_byte_to_code_point();
  std::set<uint32_t> seen(table.begin(), table.end());
  CHECK(seen.size() == 256);
  CHECK(table['A'] == 'A');
  CHECK(table[' '] == 0x120);   // Ġ
  CHECK(table['\n'] == 0x10A);  // Ċ
  CHECK(table[0] == 0x100);
  CHECK(table[0xAD] == 0x143);  // soft hyphen, the last of the 68 remapped bytes
  for (int b = 0; b < 256; ++b) REQUIRE(gpt2_code_point_to_byte(table[b]) == b);
  CHECK(gpt2_code_point_to_byte(0x20) == -1);
  CHECK(gpt2_code_point_to_byte(0x4E2D) == -1);
}

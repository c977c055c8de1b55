// The GPT-2 pre-tokeniser as a hand-written scanner (see pretokenize.h for the pattern it follows).
#include "models/data/pretokenize.h"

#include "models/data/unicode.h"

namespace tessera::data {

namespace {

enum class CharClass { letter, number, space, other };

CharClass classify(uint32_t cp) {
  if (is_letter(cp)) return CharClass::letter;
  if (is_number(cp)) return CharClass::number;
  if (is_space(cp)) return CharClass::space;
  return CharClass::other;
}

struct Scanner {
  std::string_view text;

  // The class and byte length of the character at i (i < text.size()).
  CharClass at(size_t i, size_t* len) const {
    uint32_t cp;
    *len = decode_utf8(text, i, &cp);
    return classify(cp);
  }

  // End of the run of characters of class c starting at i.
  size_t run_end(size_t i, CharClass c) const {
    while (i < text.size()) {
      size_t len;
      if (at(i, &len) != c) break;
      i += len;
    }
    return i;
  }

  // Length of the contraction ('s 't 're 've 'm 'll 'd) at i, or 0.
  size_t contraction(size_t i) const {
    if (text[i] != '\'' || i + 1 >= text.size()) return 0;
    const char a = text[i + 1];
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (i + 2 >= text.size()) return 0;
    const char b = text[i + 2];
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
  }

  // End of the piece starting at i, trying the pattern's alternatives in order.
  size_t piece_end(size_t i) const {
    if (size_t n = contraction(i)) return i + n;
    size_t len;
    CharClass c = at(i, &len);
    // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: an optional leading ASCII space.
    size_t body = i;
    if (text[i] == ' ' && i + 1 < text.size()) {
      size_t next_len;
      const CharClass next = at(i + 1, &next_len);
      if (next != CharClass::space) {
        body = i + 1;
        c = next;
      }
    }
    if (c != CharClass::space) return run_end(body, c);
    // `\s+(?!\S)`: a white-space run followed by a non-space gives back its last character, which
    // then starts the next piece (e.g. " word"); at the end of text it takes the whole run.
    const size_t end = run_end(i, CharClass::space);
    if (end == text.size()) return end;
    size_t last = end - 1;
    while (static_cast<unsigned char>(text[last]) >= 0x80 &&
           (static_cast<unsigned char>(text[last]) & 0xC0) == 0x80)
      --last;  // back to the first byte of the last white-space character
    // A run of one character cannot give one back: `\s+` takes it.
    return last > i ? last : end;
  }
};

}  // namespace

void gpt2_pretokenize(std::string_view text, const std::function<void(std::string_view)>& piece) {
  const Scanner scanner{text};
  size_t i = 0;
  while (i < text.size()) {
    const size_t end = scanner.piece_end(i);
    piece(text.substr(i, end - i));
    i = end;
  }
}

size_t gpt2_safe_split(std::string_view text) {
  // After an ASCII letter or digit, the piece holding it ends at a following space (no alternative
  // runs from a letter or digit into a space), and the pattern has no look-behind, so the space
  // starts a fresh piece whatever came before.
  for (size_t p = text.size(); p >= 2; --p) {
    const char before = text[p - 2];
    const bool alnum =
        (before >= '0' && before <= '9') || ((before | 0x20) >= 'a' && (before | 0x20) <= 'z');
    if (alnum && text[p - 1] == ' ') return p - 1;
  }
  return 0;
}

}  // namespace tessera::data

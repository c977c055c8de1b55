// GPT-2's pre-tokenisation: splits text into the pieces BPE runs on, as the reference pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// does, written as a scanner (std::regex has no \p{L}). Works on bytes: invalid UTF-8 bytes count
// as one "other" character each, so every byte string splits and the pieces concatenate back to it.
#pragma once

#include <cstddef>
#include <functional>
#include <string_view>

namespace tessera::data {

// Calls `piece` for each piece of `text`, in order.
void gpt2_pretokenize(std::string_view text, const std::function<void(std::string_view)>& piece);

// The largest p <= text.size() at which text can be cut so that pre-tokenising text[0, p) and the
// rest separately gives the same pieces as the whole, whatever follows text: a position right
// after an ASCII letter or digit and before an ASCII space. 0 when there is none.
size_t gpt2_safe_split(std::string_view text);

}  // namespace tessera::data

// GPT-2 byte-pair encoding from a user's vocab.json and merges.txt: GPT-2's byte <-> code point
// alphabet, its pre-tokenisation pattern (pretokenize.h), merges applied by rank exactly as the
// reference encoder does, and a per-word cache.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "models/data/tokenizer.h"

namespace tessera::data {

class BpeTokenizer final : public Tokenizer {
 public:
  // Reads the two files. Throws ValueError naming the file for a missing or unreadable file,
  // malformed JSON (with nlohmann's line and column), a value that is not an id (naming the
  // token), duplicate ids, a vocabulary lacking one of the 256 byte tokens, and any bad line of
  // merges.txt (with its line number): not two tokens, a token or merged token not in vocab.json,
  // a repeated merge.
  static BpeTokenizer from_files(const std::string& vocab_path, const std::string& merges_path);
  // The same from the files' contents; the names appear in messages.
  static BpeTokenizer from_strings(std::string_view vocab_json, std::string_view merges_txt,
                                   const std::string& vocab_name = "vocab.json",
                                   const std::string& merges_name = "merges.txt");

  BpeTokenizer(BpeTokenizer&&) noexcept;
  BpeTokenizer& operator=(BpeTokenizer&&) noexcept;
  ~BpeTokenizer() override;

  std::string name() const override { return "gpt2"; }
  int64_t vocab_size() const override { return int64_t(id_bytes_.size()); }
  using Tokenizer::encode;
  // Thread safe (the word cache is locked).
  void encode(std::string_view text, std::vector<uint32_t>& out) const override;
  std::string decode(std::span<const uint32_t> ids) const override;
  size_t safe_split(std::string_view text) const override;
  std::optional<uint32_t> end_of_text() const override { return token_id("<|endoftext|>"); }

  // The id of a token as vocab.json spells it (GPT-2 alphabet, e.g. "Ġthe"), or nullopt.
  std::optional<uint32_t> token_id(std::string_view token) const;
  size_t merge_count() const { return merges_.size(); }

 private:
  struct Merge {
    uint32_t rank;
    uint32_t result;
  };
  struct WordCache;

  BpeTokenizer();
  // The BPE ids of one pre-tokenised piece.
  void encode_piece(std::string_view piece, std::vector<uint32_t>& out) const;
  void merge_symbols(std::vector<uint32_t>& symbols) const;
  const Merge* find_merge(uint32_t left, uint32_t right) const;

  std::unordered_map<std::string, uint32_t> token_ids_;
  std::vector<std::string> id_bytes_;  // the bytes each id decodes to
  std::vector<bool> id_present_;       // false for ids vocab.json skips
  std::array<uint32_t, 256> byte_ids_{};
  std::unordered_map<uint64_t, Merge> merges_;  // (left << 32 | right) -> rank and result
  std::unique_ptr<WordCache> cache_;
};

}  // namespace tessera::data

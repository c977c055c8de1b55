// GPT-2 BPE: loading and validating vocab.json / merges.txt, encoding by merge rank, decoding.
#include "models/data/bpe_tokenizer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <queue>
#include <sstream>

#include "core/error.h"
#include "models/data/pretokenize.h"
#include "models/data/unicode.h"

namespace tessera::data {

namespace {

constexpr const char* kOp = "bpe_tokenizer";
// Ids are indices into dense tables; a larger id means a broken file, not a real vocabulary.
constexpr uint64_t kMaxId = uint64_t(1) << 24;
// Pieces longer than this are rare and not worth keeping; the cache is emptied when full.
constexpr size_t kMaxCachedPiece = 64;
constexpr size_t kMaxCacheEntries = size_t(1) << 18;

std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TS_CHECK(in.good(), kOp, "expected a readable file '", path,
           "', got error: ", std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The bytes a vocab.json token stands for. Tokens with characters outside GPT-2's byte alphabet
// (added special tokens in some vocabularies) can never come out of encode(); they decode to
// their own UTF-8 text.
std::string token_bytes(const std::string& token) {
  std::string bytes;
  for (size_t i = 0; i < token.size();) {
    uint32_t cp;
    const size_t len = decode_utf8(token, i, &cp);
    const int b = cp == kInvalidCodePoint ? -1 : gpt2_code_point_to_byte(cp);
    if (b < 0) return token;
    bytes.push_back(static_cast<char>(b));
    i += len;
  }
  return bytes;
}

uint64_t pair_key(uint32_t left, uint32_t right) { return (uint64_t(left) << 32) | right; }

// Hashes strings and string views alike, so looking a piece up needs no std::string copy.
struct PieceHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

}  // namespace

struct BpeTokenizer::WordCache {
  std::mutex mutex;
  std::unordered_map<std::string, std::vector<uint32_t>, PieceHash, std::equal_to<>> words;
};

BpeTokenizer::BpeTokenizer() : cache_(std::make_unique<WordCache>()) {}
BpeTokenizer::BpeTokenizer(BpeTokenizer&&) noexcept = default;
BpeTokenizer& BpeTokenizer::operator=(BpeTokenizer&&) noexcept = default;
BpeTokenizer::~BpeTokenizer() = default;

BpeTokenizer BpeTokenizer::from_files(const std::string& vocab_path,
                                      const std::string& merges_path) {
  const std::string vocab = read_whole_file(vocab_path);
  const std::string merges = read_whole_file(merges_path);
  return from_strings(vocab, merges, vocab_path, merges_path);
}

BpeTokenizer BpeTokenizer::from_strings(std::string_view vocab_json, std::string_view merges_txt,
                                        const std::string& vocab_name,
                                        const std::string& merges_name) {
  BpeTokenizer tok;
  // vocab.json: {"token": id, ...}
  nlohmann::json vocab;
  try {
    vocab = nlohmann::json::parse(vocab_json);
  } catch (const nlohmann::json::parse_error& e) {
    TS_FAIL(kOp, "expected valid JSON in '", vocab_name, "', got ", e.what());
  }
  TS_CHECK(vocab.is_object() && !vocab.empty(), kOp, "expected a JSON object of token -> id in '",
           vocab_name, "', got a ", vocab.type_name(), vocab.is_object() ? " with no entries" : "");
  uint64_t max_id = 0;
  for (const auto& [token, value] : vocab.items()) {
    TS_CHECK(value.is_number_unsigned() && value.get<uint64_t>() < kMaxId, kOp, "'", vocab_name,
             "': expected token '", token, "' to map to an integer id in [0, ", kMaxId, "), got ",
             value.dump());
    max_id = std::max(max_id, value.get<uint64_t>());
  }
  tok.id_bytes_.assign(max_id + 1, std::string());
  tok.id_present_.assign(max_id + 1, false);
  std::vector<const std::string*> id_tokens(max_id + 1, nullptr);
  for (const auto& [token, value] : vocab.items()) {
    const uint32_t id = value.get<uint32_t>();
    TS_CHECK(!tok.id_present_[id], kOp, "'", vocab_name, "': expected each id once, got id ", id,
             " for both '", *id_tokens[id], "' and '", token, "'");
    tok.id_present_[id] = true;
    tok.id_bytes_[id] = token_bytes(token);
    tok.token_ids_.emplace(token, id);
    id_tokens[id] = &tok.token_ids_.find(token)->first;
  }
  const auto& byte_cp = gpt2_byte_to_code_point();
  for (int b = 0; b < 256; ++b) {
    std::string symbol;
    append_utf8(symbol, byte_cp[b]);
    const auto it = tok.token_ids_.find(symbol);
    TS_CHECK(it != tok.token_ids_.end(), kOp, "'", vocab_name,
             "': expected a token for every byte, got none for byte ", b, " ('", symbol, "')");
    tok.byte_ids_[b] = it->second;
  }

  // merges.txt: an optional "#version" first line, then "left right" per line, best rank first.
  std::unordered_map<uint64_t, size_t> merge_lines;
  size_t line_no = 0, start = 0;
  while (start < merges_txt.size()) {
    size_t end = merges_txt.find('\n', start);
    if (end == std::string_view::npos) end = merges_txt.size();
    std::string_view line = merges_txt.substr(start, end - start);
    start = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || (line_no == 1 && line.starts_with("#version"))) continue;
    const size_t space = line.find(' ');
    TS_CHECK(space != std::string_view::npos && space > 0 && space + 1 < line.size() &&
                 line.find(' ', space + 1) == std::string_view::npos,
             kOp, "'", merges_name, "' line ", line_no,
             ": expected two tokens separated by one space, got '", line, "'");
    const std::string left(line.substr(0, space)), right(line.substr(space + 1));
    const auto find = [&](const std::string& token, const char* what) {
      const auto it = tok.token_ids_.find(token);
      TS_CHECK(it != tok.token_ids_.end(), kOp, "'", merges_name, "' line ", line_no, ": expected ",
               what, " '", token, "' to be in '", vocab_name, "', got no such token");
      return it->second;
    };
    const uint32_t l = find(left, "token"), r = find(right, "token");
    const uint32_t result = find(left + right, "merged token");
    const auto [it, fresh] = merge_lines.emplace(pair_key(l, r), line_no);
    TS_CHECK(fresh, kOp, "'", merges_name, "' line ", line_no, ": expected each merge once, got '",
             line, "' again (first on line ", it->second, ")");
    tok.merges_.emplace(pair_key(l, r), Merge{uint32_t(tok.merges_.size()), result});
  }
  return tok;
}

std::optional<uint32_t> BpeTokenizer::token_id(std::string_view token) const {
  const auto it = token_ids_.find(std::string(token));
  if (it == token_ids_.end()) return std::nullopt;
  return it->second;
}

const BpeTokenizer::Merge* BpeTokenizer::find_merge(uint32_t left, uint32_t right) const {
  const auto it = merges_.find(pair_key(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

void BpeTokenizer::merge_symbols(std::vector<uint32_t>& symbols) const {
  // The reference repeatedly takes the lowest-ranked adjacent pair and merges all its
  // non-overlapping occurrences left to right, then looks again. A heap of candidate pairs does
  // the same in O(n log n): all entries of the lowest rank are merged as one batch, in position
  // order, each checked against the current symbols (entries go stale as neighbours merge).
  const int n = int(symbols.size());
  std::vector<int> next(n), prev(n);
  std::vector<bool> alive(n, true);
  for (int i = 0; i < n; ++i) next[i] = i + 1 < n ? i + 1 : -1, prev[i] = i - 1;
  struct Candidate {
    uint32_t rank;
    int pos;  // index of the left symbol
    uint32_t left, right;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  const auto offer = [&](int pos) {
    if (pos < 0 || next[pos] < 0) return;
    if (const Merge* m = find_merge(symbols[pos], symbols[next[pos]]))
      heap.push({m->rank, pos, symbols[pos], symbols[next[pos]]});
  };
  for (int i = 0; i + 1 < n; ++i) offer(i);
  std::vector<Candidate> batch;
  while (!heap.empty()) {
    batch.clear();
    const uint32_t rank = heap.top().rank;
    while (!heap.empty() && heap.top().rank == rank) {  // popped in position order
      batch.push_back(heap.top());
      heap.pop();
    }
    for (const Candidate& c : batch) {
      const int right = next[c.pos];
      if (!alive[c.pos] || right < 0 || symbols[c.pos] != c.left || symbols[right] != c.right)
        continue;
      symbols[c.pos] = find_merge(c.left, c.right)->result;
      alive[right] = false;
      next[c.pos] = next[right];
      if (next[right] >= 0) prev[next[right]] = c.pos;
      offer(prev[c.pos]);
      offer(c.pos);
    }
  }
  size_t out = 0;
  for (int i = 0; i < n; ++i)
    if (alive[i]) symbols[out++] = symbols[i];
  symbols.resize(out);
}

void BpeTokenizer::encode_piece(std::string_view piece, std::vector<uint32_t>& out) const {
  if (piece.size() == 1) {
    out.push_back(byte_ids_[static_cast<unsigned char>(piece[0])]);
    return;
  }
  const bool cacheable = piece.size() <= kMaxCachedPiece;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_->mutex);
    const auto it = cache_->words.find(piece);
    if (it != cache_->words.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<uint32_t> symbols(piece.size());
  for (size_t i = 0; i < piece.size(); ++i)
    symbols[i] = byte_ids_[static_cast<unsigned char>(piece[i])];
  merge_symbols(symbols);
  out.insert(out.end(), symbols.begin(), symbols.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_->mutex);
    if (cache_->words.size() >= kMaxCacheEntries) cache_->words.clear();
    cache_->words.emplace(std::string(piece), std::move(symbols));
  }
}

void BpeTokenizer::encode(std::string_view text, std::vector<uint32_t>& out) const {
  gpt2_pretokenize(text, [&](std::string_view piece) { encode_piece(piece, out); });
}

std::string BpeTokenizer::decode(std::span<const uint32_t> ids) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    TS_CHECK(ids[i] < id_bytes_.size() && id_present_[ids[i]], "bpe_tokenizer.decode",
             "expected ids of tokens in the vocabulary (size ", id_bytes_.size(), "), got ", ids[i],
             " at position ", i);
    out += id_bytes_[ids[i]];
  }
  return out;
}

size_t BpeTokenizer::safe_split(std::string_view text) const { return gpt2_safe_split(text); }

}  // namespace tessera::data

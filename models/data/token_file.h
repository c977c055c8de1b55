// Binary token files: the on-disk form of a tokenised corpus that datasets memory-map.
//
// Layout (all integers little-endian; 64-byte header, then the payload):
//   offset  size  field
//        0     8  magic "TSRATOK1"
//        8     4  version, u32 = 1
//       12     4  dtype, u32: the byte width of one token id, 2 (u16) or 4 (u32)
//       16     8  token count, u64
//       24     8  vocab size, u64: every id is below it
//       32     8  checksum, u64: payload_checksum() of the payload bytes
//       40    24  reserved, zero
//       64     -  payload: token count ids of the dtype's width
// The file's size must be exactly 64 + count * width. Writers choose u16 when the vocabulary has
// at most 65536 ids (GPT-2's 50257 fits), u32 otherwise. TokenFile also reads llm.c's and
// nanoGPT's files (token_format.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <span>
#include <string>

#include "models/data/token_format.h"

namespace tessera::data {

inline constexpr char kTokenFileMagic[8] = {'T', 'S', 'R', 'A', 'T', 'O', 'K', '1'};
inline constexpr uint32_t kTokenFileVersion = 1;
inline constexpr size_t kTokenFileHeaderBytes = 64;

enum class TokenDType : uint32_t { u16 = 2, u32 = 4 };

// The narrowest dtype that holds ids below vocab_size.
TokenDType token_dtype_for_vocab(uint64_t vocab_size);

// A 64-bit checksum of a byte stream, fed in pieces of any size (the same bytes in any split give
// the same value). Word-at-a-time multiply-rotate mixing: gigabytes per second, catches flipped
// and reordered bytes; not cryptographic.
class PayloadChecksum {
 public:
  void update(const void* data, size_t bytes);
  uint64_t finish() const;

 private:
  void mix(uint64_t word);

  uint64_t state_ = 0x9E3779B97F4A7C15ull;
  uint64_t length_ = 0;
  uint64_t pending_ = 0;  // the bytes of an unfinished 8-byte word, low first
  size_t pending_bytes_ = 0;
};

// Writes a token file by streaming appends. Tokens go to "<path>.tmp.<pid>"; finish() writes the
// header, fsyncs and renames onto `path`, so readers never see a partial file. Destroying a writer
// that was not finished removes the temporary file.
class TokenFileWriter {
 public:
  // Throws ValueError when the temporary file cannot be created or vocab_size is 0 or > 2^32.
  TokenFileWriter(std::string path, uint64_t vocab_size);
  TokenFileWriter(const TokenFileWriter&) = delete;
  TokenFileWriter& operator=(const TokenFileWriter&) = delete;
  ~TokenFileWriter();

  // Throws ValueError for an id >= vocab_size (naming the file and the id's position).
  void append(std::span<const uint32_t> ids);
  void finish();

  uint64_t count() const { return count_; }
  TokenDType dtype() const { return dtype_; }
  const std::string& path() const { return path_; }

 private:
  void flush_buffer();

  std::string path_, tmp_path_;
  uint64_t vocab_size_;
  TokenDType dtype_;
  std::FILE* file_ = nullptr;
  std::string buffer_;  // encoded payload bytes not yet written
  uint64_t count_ = 0;
  PayloadChecksum checksum_;
  bool finished_ = false;
};

struct TokenFileOpenOptions {
  // Open always checks the header and the file size. `verify` also reads the payload once (at
  // memory speed) to check the checksum and that every id is below the vocab size; turn it off for
  // very large files, where datasets still check the ids of each window they read.
  bool verify = true;
  // The file's layout (token_format.h). llmc and u16 files record no vocab size: their ids are
  // checked against `vocab_size` (required for them, > 0; ignored for tessera files, which
  // record their own).
  TokenFormat format = TokenFormat::tessera;
  uint64_t vocab_size = 0;
};

// A read-only memory-mapped token file. Move-only; unmaps on destruction.
class TokenFile {
 public:
  // Throws ValueError naming the file for: a missing or unreadable file, a file shorter than the
  // header, a bad magic, an unsupported version or dtype, a size that disagrees with the count
  // (truncated or trailing bytes), and with verify a checksum mismatch or an id >= vocab size;
  // for llmc and u16 files see locate_foreign_payload (token_format.h).
  static TokenFile open(const std::string& path, const TokenFileOpenOptions& options = {});

  TokenFile(TokenFile&& other) noexcept;
  TokenFile& operator=(TokenFile&& other) noexcept;
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;
  ~TokenFile();

  const std::string& path() const { return path_; }
  uint64_t size() const { return count_; }
  uint64_t vocab_size() const { return vocab_size_; }
  TokenDType dtype() const { return dtype_; }
  TokenFormat format() const { return format_; }
  // The recorded payload checksum; nullopt for formats that record none (llmc, u16).
  std::optional<uint64_t> checksum() const { return checksum_; }

  uint32_t operator[](uint64_t i) const;
  // Copies ids [start, start + out.size()) into `out`, checking each against the vocab size.
  // Throws ValueError for a range past the end or an out-of-vocabulary id (naming the file).
  void read(uint64_t start, std::span<int64_t> out) const;

 private:
  TokenFile() = default;
  void verify_payload() const;

  std::string path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const unsigned char* payload_ = nullptr;
  uint64_t count_ = 0, vocab_size_ = 0;
  std::optional<uint64_t> checksum_;
  TokenDType dtype_ = TokenDType::u16;
  TokenFormat format_ = TokenFormat::tessera;
};

}  // namespace tessera::data

// The token file formats Tessera reads besides its own: llm.c's and nanoGPT's. TokenFile::open
// (token_file.h) memory-maps any of them and hands out ids the same way; this file names the
// formats and finds the ids inside the foreign ones.
//
//   tessera  ours (token_file.h): 64-byte header with the count, dtype, vocab size and checksum.
//   llmc     llm.c's (dev/data/data_common.py write_datafile): 256 little-endian int32 (1024
//            bytes), header[0] = magic 20240520, header[1] = version 1, header[2] = token count,
//            then count u16 ids. No vocab size or checksum.
//   u16      nanoGPT's train.bin / val.bin (np.uint16 tofile): raw little-endian u16 ids, no
//   header.
// Files without a vocab size (llmc, u16) are read against a vocab size the caller gives (the
// model's vocabulary): every id must be below it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace tessera::data {

enum class TokenFormat { tessera, llmc, u16 };

inline constexpr int32_t kLlmcMagic = 20240520;
inline constexpr int32_t kLlmcVersion = 1;
inline constexpr size_t kLlmcHeaderBytes = 256 * sizeof(int32_t);

const char* token_format_name(TokenFormat format);
// "tessera", "llmc" or "u16"; anything else throws ValueError naming `key` (the config key or
// flag it came from) and the formats there are.
TokenFormat parse_token_format(const std::string& name, const std::string& key = "data.format");
// The format a file's first bytes announce: tessera (magic TSRATOK1) or llmc (int32 20240520);
// nullopt for anything else (a u16 file has no header to recognise). Throws ValueError naming
// the file when it cannot be read.
std::optional<TokenFormat> detect_token_format(const std::string& path);

// Where the ids of a mapped file lie.
struct TokenPayload {
  size_t offset = 0;                 // bytes before the first id
  uint64_t count = 0;                // ids
  uint32_t width = 2;                // bytes per id: 2 (u16) or 4 (u32)
  uint64_t vocab_size = 0;           // every id must be below it
  std::optional<uint64_t> checksum;  // PayloadChecksum of the ids, when the format records one
};

// Throws ValueError naming `path` unless a file of `file_bytes` can hold `format`'s header (or,
// for u16, one id): the message says the file is empty when it is.
void check_token_file_size(TokenFormat format, const std::string& path, uint64_t file_bytes);

// The payload of an llmc or u16 file of `file_bytes` bytes starting at `bytes`, read against
// `vocab_size` (> 0; these formats record none). Throws ValueError naming `path` for a bad magic
// or version, a count that disagrees with the file size (truncated or trailing bytes), an odd
// u16 byte length, or vocab_size 0.
TokenPayload locate_foreign_payload(TokenFormat format, const std::string& path,
                                    const unsigned char* bytes, uint64_t file_bytes,
                                    uint64_t vocab_size);

}  // namespace tessera::data

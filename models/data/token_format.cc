// The llm.c and nanoGPT token file layouts, and the format names (see token_format.h).
#include "models/data/token_format.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/error.h"
#include "models/data/token_file.h"

namespace tessera::data {
namespace {

constexpr const char* kOp = "token_file";

int32_t load_i32(const unsigned char* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// "truncated" or "trailing bytes" for a file of `actual` bytes that should have `expected`.
const char* size_problem(uint64_t actual, uint64_t expected) {
  return actual < expected ? "the file is truncated" : "trailing bytes after the ids";
}

TokenPayload locate_llmc(const std::string& path, const unsigned char* bytes, uint64_t file_bytes,
                         uint64_t vocab_size) {
  const int32_t magic = load_i32(bytes), version = load_i32(bytes + 4), count = load_i32(bytes + 8);
  // A frequent mix-up gets its own hint: our format under data.format llmc.
  const bool ours = std::memcmp(bytes, kTokenFileMagic, sizeof(kTokenFileMagic)) == 0;
  TS_CHECK(magic == kLlmcMagic, kOp, "expected llm.c magic ", kLlmcMagic,
           " in the first int32 of '", path, "', got ", magic,
           ours ? ": this is a Tessera token file (format tessera)" : ": not an llm.c token file");
  TS_CHECK(version == kLlmcVersion, kOp, "expected llm.c token file version ", kLlmcVersion,
           " in '", path, "', got ", version);
  TS_CHECK(count >= 0, kOp, "expected a token count >= 0 in header[2] of '", path, "', got ",
           count);
  const uint64_t expected = kLlmcHeaderBytes + uint64_t(count) * 2;
  TS_CHECK(file_bytes == expected, kOp, "expected '", path, "' to hold ", count,
           " tokens of 2 bytes (", kLlmcHeaderBytes, " header bytes + ", count, " x 2), got ",
           file_bytes, " bytes: ", size_problem(file_bytes, expected));
  return {.offset = kLlmcHeaderBytes,
          .count = uint64_t(count),
          .width = 2,
          .vocab_size = vocab_size,
          .checksum = std::nullopt};
}

TokenPayload locate_u16(const std::string& path, uint64_t file_bytes, uint64_t vocab_size) {
  TS_CHECK(file_bytes % 2 == 0, kOp, "expected '", path,
           "' to hold u16 ids (an even number of bytes), got ", file_bytes,
           " bytes: the file is truncated or not raw u16 ids");
  return {.offset = 0,
          .count = file_bytes / 2,
          .width = 2,
          .vocab_size = vocab_size,
          .checksum = std::nullopt};
}

}  // namespace

const char* token_format_name(TokenFormat format) {
  switch (format) {
    case TokenFormat::tessera:
      return "tessera";
    case TokenFormat::llmc:
      return "llmc";
    case TokenFormat::u16:
      return "u16";
  }
  return "?";
}

TokenFormat parse_token_format(const std::string& name, const std::string& key) {
  for (TokenFormat f : {TokenFormat::tessera, TokenFormat::llmc, TokenFormat::u16})
    if (name == token_format_name(f)) return f;
  TS_FAIL("config", key, ": expected one of tessera (Tessera's token files), llmc (llm.c's) or ",
          "u16 (nanoGPT's raw u16 ids), got '", name, "'");
}

std::optional<TokenFormat> detect_token_format(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TS_CHECK(in.good(), kOp, "expected a readable token file '", path,
           "', got error: ", std::strerror(errno));
  unsigned char head[8] = {};
  in.read(reinterpret_cast<char*>(head), sizeof(head));
  if (in.gcount() >= 8 && std::memcmp(head, kTokenFileMagic, 8) == 0) return TokenFormat::tessera;
  if (in.gcount() >= 4 && load_i32(head) == kLlmcMagic) return TokenFormat::llmc;
  return std::nullopt;
}

void check_token_file_size(TokenFormat format, const std::string& path, uint64_t file_bytes) {
  const char* empty = file_bytes == 0 ? ": the file is empty" : "";
  switch (format) {
    case TokenFormat::tessera:
      TS_CHECK(file_bytes >= kTokenFileHeaderBytes, kOp, "expected '", path,
               "' to hold at least the ", kTokenFileHeaderBytes, "-byte header, got ", file_bytes,
               " bytes", empty);
      return;
    case TokenFormat::llmc:
      TS_CHECK(file_bytes >= kLlmcHeaderBytes, kOp, "expected '", path,
               "' to hold at least llm.c's ", kLlmcHeaderBytes, "-byte header, got ", file_bytes,
               " bytes", empty);
      return;
    case TokenFormat::u16:
      TS_CHECK(file_bytes >= 2, kOp, "expected '", path,
               "' to hold at least one u16 token id, got ", file_bytes, " bytes", empty);
      return;
  }
}

TokenPayload locate_foreign_payload(TokenFormat format, const std::string& path,
                                    const unsigned char* bytes, uint64_t file_bytes,
                                    uint64_t vocab_size) {
  TS_CHECK(format != TokenFormat::tessera, kOp, "'", path,
           "': Tessera token files carry their own header (TokenFile::open reads it)");
  TS_CHECK(vocab_size > 0, kOp, "expected a vocab size > 0 to read ", token_format_name(format),
           " file '", path, "' against (the format records none; pass the model's), got 0");
  check_token_file_size(format, path, file_bytes);
  return format == TokenFormat::llmc ? locate_llmc(path, bytes, file_bytes, vocab_size)
                                     : locate_u16(path, file_bytes, vocab_size);
}

}  // namespace tessera::data

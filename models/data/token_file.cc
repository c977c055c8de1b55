// Token file writing (streamed, atomic) and reading (memory-mapped, validated); see token_file.h.
#include "models/data/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "core/error.h"

namespace tessera::data {

static_assert(std::endian::native == std::endian::little,
              "token files are little-endian; a big-endian host would need byte swaps");

namespace {

constexpr uint64_t kP1 = 0x9E3779B185EBCA87ull, kP2 = 0xC2B2AE3D27D4EB4Full;
constexpr size_t kWriteBuffer = size_t(1) << 20;

uint64_t load_u64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

uint32_t load_u32(const unsigned char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

uint32_t load_id(const unsigned char* p, TokenDType dtype) {
  if (dtype == TokenDType::u16) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
  }
  return load_u32(p);
}

void fsync_parent_dir(const std::string& path) {
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (parent.empty()) parent = ".";
  const int fd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);  // best effort: the rename is already visible to readers
    ::close(fd);
  }
}

}  // namespace

TokenDType token_dtype_for_vocab(uint64_t vocab_size) {
  return vocab_size <= 65536 ? TokenDType::u16 : TokenDType::u32;
}

// ---------------------------------------------------------------------------------------------
// PayloadChecksum

void PayloadChecksum::mix(uint64_t word) { state_ = std::rotl(state_ ^ (word * kP1), 29) * kP2; }

void PayloadChecksum::update(const void* data, size_t bytes) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  length_ += bytes;
  while (pending_bytes_ > 0 && pending_bytes_ < 8 && bytes > 0) {
    pending_ |= uint64_t(*p++) << (8 * pending_bytes_++);
    --bytes;
  }
  if (pending_bytes_ == 8) {
    mix(pending_);
    pending_ = 0;
    pending_bytes_ = 0;
  }
  for (; bytes >= 8; bytes -= 8, p += 8) mix(load_u64(p));
  for (; bytes > 0; --bytes) pending_ |= uint64_t(*p++) << (8 * pending_bytes_++);
}

uint64_t PayloadChecksum::finish() const {
  uint64_t h = state_;
  if (pending_bytes_ > 0) h = std::rotl(h ^ (pending_ * kP1), 29) * kP2;
  h ^= length_ * kP2;
  // Final avalanche so nearby inputs give unrelated values.
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDull;
  h ^= h >> 33;
  h *= 0xC4CEB9FE1A85EC53ull;
  return h ^ (h >> 33);
}

// ---------------------------------------------------------------------------------------------
// TokenFileWriter

TokenFileWriter::TokenFileWriter(std::string path, uint64_t vocab_size)
    : path_(std::move(path)), vocab_size_(vocab_size), dtype_(token_dtype_for_vocab(vocab_size)) {
  TS_CHECK(vocab_size > 0 && vocab_size <= (uint64_t(1) << 32), "token_file",
           "expected a vocab size in [1, 2^32] for '", path_, "', got ", vocab_size);
  tmp_path_ = path_ + ".tmp." + std::to_string(::getpid());
  file_ = std::fopen(tmp_path_.c_str(), "wb");
  TS_CHECK(file_ != nullptr, "token_file", "expected to create '", tmp_path_, "' for '", path_,
           "', got error: ", std::strerror(errno));
  const char zeros[kTokenFileHeaderBytes] = {};
  if (std::fwrite(zeros, 1, sizeof(zeros), file_) != sizeof(zeros))
    throw InternalError("token_file",
                        str_cat("writing '", tmp_path_, "' failed: ", std::strerror(errno)));
  buffer_.reserve(kWriteBuffer + 4096);
}

TokenFileWriter::~TokenFileWriter() {
  if (file_ != nullptr) std::fclose(file_);
  if (!finished_) std::remove(tmp_path_.c_str());
}

void TokenFileWriter::append(std::span<const uint32_t> ids) {
  TS_CHECK(!finished_, "token_file", "expected appends before finish() of '", path_,
           "', got an append after it");
  const size_t width = size_t(dtype_);
  for (size_t i = 0; i < ids.size(); ++i) {
    const uint32_t id = ids[i];
    TS_CHECK(id < vocab_size_, "token_file", "expected ids below the vocab size ", vocab_size_,
             " in '", path_, "', got ", id, " at token ", count_ + i);
    const size_t at = buffer_.size();
    buffer_.resize(at + width);
    if (dtype_ == TokenDType::u16) {
      const uint16_t v = uint16_t(id);
      std::memcpy(buffer_.data() + at, &v, 2);
    } else {
      std::memcpy(buffer_.data() + at, &id, 4);
    }
    if (buffer_.size() >= kWriteBuffer) flush_buffer();
  }
  count_ += ids.size();
}

void TokenFileWriter::flush_buffer() {
  checksum_.update(buffer_.data(), buffer_.size());
  if (std::fwrite(buffer_.data(), 1, buffer_.size(), file_) != buffer_.size())
    throw InternalError("token_file",
                        str_cat("writing '", tmp_path_, "' failed: ", std::strerror(errno)));
  buffer_.clear();
}

void TokenFileWriter::finish() {
  TS_CHECK(!finished_, "token_file", "expected one finish() of '", path_, "', got a second");
  flush_buffer();
  unsigned char header[kTokenFileHeaderBytes] = {};
  const uint32_t version = kTokenFileVersion, dtype = uint32_t(dtype_);
  const uint64_t sum = checksum_.finish();
  std::memcpy(header, kTokenFileMagic, 8);
  std::memcpy(header + 8, &version, 4);
  std::memcpy(header + 12, &dtype, 4);
  std::memcpy(header + 16, &count_, 8);
  std::memcpy(header + 24, &vocab_size_, 8);
  std::memcpy(header + 32, &sum, 8);
  const bool ok = std::fseek(file_, 0, SEEK_SET) == 0 &&
                  std::fwrite(header, 1, sizeof(header), file_) == sizeof(header) &&
                  std::fflush(file_) == 0 && ::fsync(::fileno(file_)) == 0;
  const int err = errno;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!ok || !closed)
    throw InternalError("token_file",
                        str_cat("writing '", tmp_path_, "' failed: ", std::strerror(err)));
  if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0)
    throw InternalError("token_file", str_cat("renaming '", tmp_path_, "' to '", path_,
                                              "' failed: ", std::strerror(errno)));
  finished_ = true;
  fsync_parent_dir(path_);
}

// ---------------------------------------------------------------------------------------------
// TokenFile

namespace {

// Bytes as text, non-printable ones as \xNN (a binary magic must not cut the message short).
std::string printable(const unsigned char* p, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    if (p[i] >= 0x20 && p[i] < 0x7F) {
      out += char(p[i]);
    } else {
      char hex[5];
      std::snprintf(hex, sizeof(hex), "\\x%02x", p[i]);
      out += hex;
    }
  }
  return out;
}

// The payload of a Tessera token file of `file_bytes` bytes mapped at `h` (header checked).
TokenPayload locate_tessera_payload(const std::string& path, const unsigned char* h,
                                    uint64_t file_bytes) {
  constexpr const char* op = "token_file";
  TS_CHECK(std::memcmp(h, kTokenFileMagic, 8) == 0, op, "expected '", path,
           "' to start with magic TSRATOK1, got '", printable(h, 8), "': not a Tessera token file",
           load_u32(h) == uint32_t(kLlmcMagic) ? " (it is llm.c's: format llmc)" : "");
  const uint32_t version = load_u32(h + 8), dtype = load_u32(h + 12);
  TS_CHECK(version == kTokenFileVersion, op, "expected token file version ", kTokenFileVersion,
           " in '", path, "', got ", version);
  TS_CHECK(dtype == 2 || dtype == 4, op, "expected dtype 2 (u16) or 4 (u32) in '", path, "', got ",
           dtype);
  TokenPayload p{.offset = kTokenFileHeaderBytes,
                 .count = load_u64(h + 16),
                 .width = dtype,
                 .vocab_size = load_u64(h + 24),
                 .checksum = load_u64(h + 32)};
  TS_CHECK(p.vocab_size > 0 && p.vocab_size <= (uint64_t(1) << 32), op,
           "expected a vocab size in [1, 2^32] in '", path, "', got ", p.vocab_size);
  const uint64_t payload = file_bytes - kTokenFileHeaderBytes;
  const bool fits = p.count <= payload / dtype;
  TS_CHECK(fits && p.count * dtype == payload, op, "expected '", path, "' to hold ", p.count,
           " tokens of ", dtype, " bytes (", p.count, " x ", dtype, " + ", kTokenFileHeaderBytes,
           " header bytes), got ", file_bytes,
           " bytes: ", fits ? "trailing bytes after the payload" : "the file is truncated");
  return p;
}

}  // namespace

TokenFile TokenFile::open(const std::string& path, const TokenFileOpenOptions& options) {
  constexpr const char* op = "token_file";
  TokenFile tf;
  tf.path_ = path;
  tf.format_ = options.format;
  const int fd = ::open(path.c_str(), O_RDONLY);
  TS_CHECK(fd >= 0, op, "expected a readable token file '", path,
           "', got error: ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) st.st_size = 0;
  try {
    check_token_file_size(options.format, path, uint64_t(st.st_size));
  } catch (...) {
    ::close(fd);
    throw;
  }
  tf.map_bytes_ = size_t(st.st_size);
  tf.map_ = ::mmap(nullptr, tf.map_bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);  // the mapping keeps the file alive
  if (tf.map_ == MAP_FAILED) {
    tf.map_ = nullptr;
    TS_FAIL(op, "expected to memory-map '", path, "', got error: ", std::strerror(err));
  }
  const unsigned char* h = static_cast<const unsigned char*>(tf.map_);
  const TokenPayload p =
      options.format == TokenFormat::tessera
          ? locate_tessera_payload(path, h, tf.map_bytes_)
          : locate_foreign_payload(options.format, path, h, tf.map_bytes_, options.vocab_size);
  tf.dtype_ = TokenDType(p.width);
  tf.count_ = p.count;
  tf.vocab_size_ = p.vocab_size;
  tf.checksum_ = p.checksum;
  tf.payload_ = h + p.offset;
  if (options.verify) tf.verify_payload();
  return tf;
}

void TokenFile::verify_payload() const {
  const size_t width = size_t(dtype_);
  const uint64_t block = uint64_t(1) << 18;  // ids per pass: checksum and range stay in cache
  PayloadChecksum sum;
  for (uint64_t start = 0; start < count_; start += block) {
    const uint64_t n = std::min(block, count_ - start);
    const unsigned char* p = payload_ + start * width;
    if (checksum_) sum.update(p, n * width);
    uint32_t max_id = 0;
    for (uint64_t i = 0; i < n; ++i) max_id = std::max(max_id, load_id(p + i * width, dtype_));
    if (max_id >= vocab_size_) {
      for (uint64_t i = 0; i < n; ++i) {
        const uint32_t id = load_id(p + i * width, dtype_);
        TS_CHECK(id < vocab_size_, "token_file", "expected ids below the vocab size ", vocab_size_,
                 " in '", path_, "', got ", id, " at token ", start + i);
      }
    }
  }
  if (!checksum_) return;  // llmc and u16 files record none
  const uint64_t actual = sum.finish();
  TS_CHECK(actual == *checksum_, "token_file", "expected payload checksum ", *checksum_, " in '",
           path_, "', got ", actual, ": the file is corrupt");
}

TokenFile::TokenFile(TokenFile&& other) noexcept { *this = std::move(other); }

TokenFile& TokenFile::operator=(TokenFile&& other) noexcept {
  if (this != &other) {
    if (map_ != nullptr) ::munmap(map_, map_bytes_);
    path_ = std::move(other.path_);
    map_ = std::exchange(other.map_, nullptr);
    map_bytes_ = std::exchange(other.map_bytes_, 0);
    payload_ = std::exchange(other.payload_, nullptr);
    count_ = other.count_;
    vocab_size_ = other.vocab_size_;
    checksum_ = other.checksum_;
    dtype_ = other.dtype_;
    format_ = other.format_;
  }
  return *this;
}

TokenFile::~TokenFile() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
}

uint32_t TokenFile::operator[](uint64_t i) const {
  TS_CHECK(i < count_, "token_file", "expected a token index below ", count_, " in '", path_,
           "', got ", i);
  return load_id(payload_ + i * size_t(dtype_), dtype_);
}

void TokenFile::read(uint64_t start, std::span<int64_t> out) const {
  TS_CHECK(start <= count_ && out.size() <= count_ - start, "token_file",
           "expected a range within the ", count_, " tokens of '", path_, "', got [", start, ", ",
           start + out.size(), ")");
  const size_t width = size_t(dtype_);
  const unsigned char* p = payload_ + start * width;
  for (size_t i = 0; i < out.size(); ++i) {
    const uint32_t id = load_id(p + i * width, dtype_);
    TS_CHECK(id < vocab_size_, "token_file", "expected ids below the vocab size ", vocab_size_,
             " in '", path_, "', got ", id, " at token ", start + i);
    out[i] = id;
  }
}

}  // namespace tessera::data

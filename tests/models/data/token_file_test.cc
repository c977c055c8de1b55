// Token files: round trips in both dtypes, the header layout, and every corruption with its
// message.
#include "models/data/token_file.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <numeric>

#include "core/error.h"
#include "tests/models/data/data_test_util.h"

using namespace tessera;
using namespace tessera::data;
using tessera::data::testing::read_file;
using tessera::data::testing::ScratchDir;
using tessera::data::testing::write_file;

namespace {

std::vector<uint32_t> sample_ids(size_t n, uint32_t vocab) {
  std::vector<uint32_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = uint32_t((i * 2654435761u + 17) % vocab);
  return ids;
}

// Writes ids in uneven appends (so the streaming path and the checksum's word joins are used).
void write_tokens(const std::string& path, const std::vector<uint32_t>& ids, uint64_t vocab) {
  TokenFileWriter w(path, vocab);
  size_t i = 0, step = 1;
  while (i < ids.size()) {
    const size_t n = std::min(step, ids.size() - i);
    w.append(std::span(ids).subspan(i, n));
    i += n;
    step = step * 3 + 1;
  }
  w.finish();
}

std::string patched(std::string bytes, size_t offset, const void* value, size_t n) {
  std::memcpy(bytes.data() + offset, value, n);
  return bytes;
}

}  // namespace

TEST_CASE("token file round trip in u16 and u32", "[token_file]") {
  ScratchDir dir;
  for (const uint64_t vocab : {uint64_t(256), uint64_t(50257), uint64_t(65536), uint64_t(100000)}) {
    const std::string path = dir.file("t" + std::to_string(vocab) + ".tok");
    const std::vector<uint32_t> ids = sample_ids(300001, uint32_t(vocab));
    write_tokens(path, ids, vocab);
    const TokenDType want = vocab <= 65536 ? TokenDType::u16 : TokenDType::u32;
    REQUIRE(std::filesystem::file_size(path) == 64 + ids.size() * size_t(want));
    const TokenFile f = TokenFile::open(path);
    CHECK(f.dtype() == want);
    CHECK(f.size() == ids.size());
    CHECK(f.vocab_size() == vocab);
    for (size_t i = 0; i < ids.size(); i += 997) REQUIRE(f[i] == ids[i]);
    std::vector<int64_t> window(1000);
    f.read(ids.size() - 1000, window);
    for (size_t i = 0; i < 1000; ++i) REQUIRE(window[i] == int64_t(ids[ids.size() - 1000 + i]));
  }
}

TEST_CASE("token file header layout is the documented one", "[token_file]") {
  ScratchDir dir;
  const std::string path = dir.file("h.tok");
  write_tokens(path, {1, 2, 3}, 50257);
  const std::string bytes = read_file(path);
  REQUIRE(bytes.size() == 64 + 3 * 2);
  CHECK(bytes.substr(0, 8) == "TSRATOK1");
  uint32_t version, dtype;
  uint64_t count, vocab;
  std::memcpy(&version, bytes.data() + 8, 4);
  std::memcpy(&dtype, bytes.data() + 12, 4);
  std::memcpy(&count, bytes.data() + 16, 8);
  std::memcpy(&vocab, bytes.data() + 24, 8);
  CHECK(version == 1);
  CHECK(dtype == 2);
  CHECK(count == 3);
  CHECK(vocab == 50257);
  CHECK(bytes.substr(40, 24) == std::string(24, '\0'));
  CHECK(uint8_t(bytes[64]) == 1);  // little-endian payload
  CHECK(uint8_t(bytes[65]) == 0);
  PayloadChecksum sum;
  sum.update(bytes.data() + 64, 6);
  uint64_t stored;
  std::memcpy(&stored, bytes.data() + 32, 8);
  CHECK(stored == sum.finish());
}

TEST_CASE("payload checksum is split-invariant and order-sensitive", "[token_file]") {
  std::string data(1000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = char(i * 7 + 3);
  PayloadChecksum whole;
  whole.update(data.data(), data.size());
  for (size_t split : {size_t(1), size_t(3), size_t(8), size_t(13), size_t(999)}) {
    PayloadChecksum parts;
    for (size_t i = 0; i < data.size(); i += split)
      parts.update(data.data() + i, std::min(split, data.size() - i));
    REQUIRE(parts.finish() == whole.finish());
  }
  std::string swapped = data;
  std::swap(swapped[10], swapped[20]);
  PayloadChecksum other;
  other.update(swapped.data(), swapped.size());
  CHECK(other.finish() != whole.finish());
  PayloadChecksum shorter;
  shorter.update(data.data(), data.size() - 1);
  CHECK(shorter.finish() != whole.finish());
}

TEST_CASE("token file writer is atomic and checks ids", "[token_file]") {
  ScratchDir dir;
  const std::string path = dir.file("w.tok");
  {
    TokenFileWriter w(path, 10);
    w.append(std::vector<uint32_t>{1, 2, 3});
    CHECK_FALSE(std::filesystem::exists(path));  // only the temporary exists before finish
    REQUIRE_THROWS_WITH(w.append(std::vector<uint32_t>{4, 10}),
                        Catch::Contains("expected ids below the vocab size 10") &&
                            Catch::Contains("got 10 at token 4") && Catch::Contains(path));
  }  // abandoned: the temporary is removed
  CHECK(std::filesystem::is_empty(dir.path()));
  REQUIRE_THROWS_AS(TokenFileWriter(dir.file("no/such/dir/x.tok"), 10), ValueError);
  REQUIRE_THROWS_WITH(TokenFileWriter(path, 0),
                      Catch::Contains("expected a vocab size in [1, 2^32]"));
  TokenFileWriter empty_writer(path, 5);
  empty_writer.finish();
  const TokenFile empty = TokenFile::open(path);
  CHECK(empty.size() == 0);
}

TEST_CASE("token file corruption gives a message naming the file", "[token_file]") {
  ScratchDir dir;
  const std::string good = dir.file("good.tok");
  write_tokens(good, sample_ids(1000, 300), 300);
  const std::string bytes = read_file(good);
  const std::string bad = dir.file("bad.tok");
  const auto open_bad = [&](const std::string& content, TokenFileOpenOptions opts = {}) {
    write_file(bad, content);
    return TokenFile::open(bad, opts);
  };
  const auto names_file = Catch::Contains(bad);

  SECTION("missing file") {
    REQUIRE_THROWS_WITH(TokenFile::open(dir.file("absent.tok")),
                        Catch::Contains("absent.tok") && Catch::Contains("No such file"));
  }
  SECTION("shorter than the header") {
    REQUIRE_THROWS_WITH(open_bad(bytes.substr(0, 20)),
                        names_file && Catch::Contains("at least the 64-byte header, got 20 bytes"));
  }
  SECTION("bad magic") {
    REQUIRE_THROWS_WITH(open_bad(patched(bytes, 0, "NOTATOKN", 8)),
                        names_file && Catch::Contains("magic TSRATOK1, got 'NOTATOKN'"));
  }
  SECTION("unsupported version") {
    const uint32_t v = 7;
    REQUIRE_THROWS_WITH(
        open_bad(patched(bytes, 8, &v, 4)),
        names_file && Catch::Contains("expected token file version 1") && Catch::Contains("got 7"));
  }
  SECTION("unsupported dtype") {
    const uint32_t d = 3;
    REQUIRE_THROWS_WITH(
        open_bad(patched(bytes, 12, &d, 4)),
        names_file && Catch::Contains("dtype 2 (u16) or 4 (u32)") && Catch::Contains("got 3"));
  }
  SECTION("truncated payload") {
    REQUIRE_THROWS_WITH(
        open_bad(bytes.substr(0, bytes.size() - 2)),
        names_file && Catch::Contains("hold 1000 tokens") && Catch::Contains("truncated"));
  }
  SECTION("trailing bytes") {
    REQUIRE_THROWS_WITH(open_bad(bytes + "xy"), names_file && Catch::Contains("trailing bytes"));
  }
  SECTION("count larger than the file") {
    const uint64_t huge = uint64_t(1) << 62;
    REQUIRE_THROWS_WITH(open_bad(patched(bytes, 16, &huge, 8)),
                        names_file && Catch::Contains("truncated"));
  }
  SECTION("zero vocab size") {
    const uint64_t zero = 0;
    REQUIRE_THROWS_WITH(open_bad(patched(bytes, 24, &zero, 8)),
                        names_file && Catch::Contains("vocab size in [1, 2^32]"));
  }
  SECTION("flipped payload byte fails the checksum") {
    std::string flipped = bytes;
    flipped[64 + 776] ^= 0x01;  // low byte of token 388: stays below 300
    REQUIRE_THROWS_WITH(open_bad(flipped),
                        names_file && Catch::Contains("checksum") && Catch::Contains("corrupt"));
    // Without verification the header is trusted; reads still check ids.
    CHECK_NOTHROW(open_bad(flipped, {.verify = false}));
  }
  SECTION("id at or above the vocab size: found at open, or lazily on read") {
    std::vector<uint32_t> ids = sample_ids(1000, 299);
    ids[500] = 299;
    write_tokens(good, ids, 300);
    const uint64_t smaller = 299;  // the header now claims a vocabulary the payload exceeds
    const std::string lying = patched(read_file(good), 24, &smaller, 8);
    REQUIRE_THROWS_WITH(open_bad(lying), names_file &&
                                             Catch::Contains("below the vocab size 299") &&
                                             Catch::Contains("got 299 at token 500"));
    const TokenFile lazy = open_bad(lying, {.verify = false});
    std::vector<int64_t> out(10);
    CHECK_NOTHROW(lazy.read(0, out));
    REQUIRE_THROWS_WITH(lazy.read(495, out), names_file && Catch::Contains("got 299 at token 500"));
  }
  SECTION("range past the end") {
    const TokenFile f = TokenFile::open(good);
    std::vector<int64_t> out(10);
    REQUIRE_THROWS_WITH(f.read(995, out), Catch::Contains("[995, 1005)") && Catch::Contains(good));
  }
}

// llm.c's and nanoGPT's token files read through TokenFile: exact ids back, detection by magic,
// and every header error with a message naming the file and what was expected.
#include "models/data/token_format.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "models/data/token_dataset.h"
#include "models/data/token_file.h"
#include "tests/models/data/data_test_util.h"

using namespace tessera;
using namespace tessera::data;
using tessera::data::testing::ScratchDir;
using tessera::data::testing::write_file;

namespace {

std::string u16_bytes(const std::vector<uint16_t>& ids) {
  std::string out(ids.size() * 2, '\0');
  std::memcpy(out.data(), ids.data(), out.size());
  return out;
}

// llm.c's write_datafile: 256 int32 (magic, version, count, zeros), then the u16 ids.
std::string llmc_bytes(const std::vector<uint16_t>& ids, int32_t magic = kLlmcMagic,
                       int32_t version = kLlmcVersion, int64_t count = -1) {
  std::vector<int32_t> header(256, 0);
  header[0] = magic;
  header[1] = version;
  header[2] = int32_t(count < 0 ? int64_t(ids.size()) : count);
  std::string out(kLlmcHeaderBytes, '\0');
  std::memcpy(out.data(), header.data(), kLlmcHeaderBytes);
  return out + u16_bytes(ids);
}

std::vector<uint16_t> sample_ids(size_t n, uint32_t vocab) {
  std::vector<uint16_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = uint16_t((i * 2654435761u + 7) % vocab);
  return ids;
}

TokenFile open_as(const std::string& path, TokenFormat format, uint64_t vocab, bool verify = true) {
  return TokenFile::open(path, {.verify = verify, .format = format, .vocab_size = vocab});
}

}  // namespace

TEST_CASE("llmc and u16 files read back their exact ids", "[token_format]") {
  ScratchDir dir;
  const std::vector<uint16_t> ids = sample_ids(5001, 50257);
  const std::string llmc = dir.file("train.bin"), raw = dir.file("raw.bin");
  write_file(llmc, llmc_bytes(ids));
  write_file(raw, u16_bytes(ids));
  for (const auto& [path, format] : {std::pair(llmc, TokenFormat::llmc), {raw, TokenFormat::u16}}) {
    const TokenFile f = open_as(path, format, 50257);
    CHECK(f.format() == format);
    CHECK(f.size() == ids.size());
    CHECK(f.vocab_size() == 50257);
    CHECK(f.dtype() == TokenDType::u16);
    CHECK_FALSE(f.checksum().has_value());
    for (size_t i = 0; i < ids.size(); ++i) REQUIRE(f[i] == ids[i]);
    std::vector<int64_t> window(64);
    f.read(ids.size() - 64, window);
    for (size_t i = 0; i < 64; ++i) REQUIRE(window[i] == ids[ids.size() - 64 + i]);

    // Through the dataset: window w of T + 1 tokens starts at w * T.
    TokenDataset ds(path, {.context = 8, .shuffle = false, .format = format, .vocab_size = 50257});
    CHECK(ds.num_windows() == int64_t((ids.size() - 9) / 8 + 1));
    std::vector<int64_t> row(9);
    ds.read_window(3, row);
    for (size_t i = 0; i < 9; ++i) REQUIRE(row[i] == ids[24 + i]);
  }
}

TEST_CASE("token formats by name and by magic", "[token_format]") {
  ScratchDir dir;
  CHECK(parse_token_format("llmc") == TokenFormat::llmc);
  CHECK(parse_token_format("u16") == TokenFormat::u16);
  CHECK(parse_token_format("tessera") == TokenFormat::tessera);
  CHECK(std::string(token_format_name(TokenFormat::llmc)) == "llmc");
  REQUIRE_THROWS_WITH(parse_token_format("npy", "--data-format"),
                      Catch::Contains("--data-format") && Catch::Contains("llmc") &&
                          Catch::Contains("u16") && Catch::Contains("got 'npy'"));

  const std::string ours = dir.file("a.tok"), llmc = dir.file("b.bin"), raw = dir.file("c.bin");
  TokenFileWriter w(ours, 256);
  w.append(std::vector<uint32_t>(600, 5));  // longer than llm.c's header, to read its magic
  w.finish();
  write_file(llmc, llmc_bytes({1, 2, 3}));
  write_file(raw, u16_bytes({1, 2, 3, 4}));
  CHECK(detect_token_format(ours) == TokenFormat::tessera);
  CHECK(detect_token_format(llmc) == TokenFormat::llmc);
  CHECK_FALSE(detect_token_format(raw).has_value());
  REQUIRE_THROWS_WITH(detect_token_format(dir.file("absent.bin")),
                      Catch::Contains("absent.bin") && Catch::Contains("readable"));

  // Each format opened as the other says what the file is.
  REQUIRE_THROWS_WITH(open_as(ours, TokenFormat::llmc, 256),
                      Catch::Contains(ours) && Catch::Contains("a Tessera token file"));
  REQUIRE_THROWS_WITH(TokenFile::open(llmc),
                      Catch::Contains(llmc) && Catch::Contains("it is llm.c's: format llmc"));
}

TEST_CASE("llmc header errors name the file and what was expected", "[token_format]") {
  ScratchDir dir;
  const std::string bad = dir.file("bad.bin");
  const std::vector<uint16_t> ids = sample_ids(100, 1000);
  const auto open_bad = [&](const std::string& bytes, uint64_t vocab = 1000, bool verify = true) {
    write_file(bad, bytes);
    return open_as(bad, TokenFormat::llmc, vocab, verify);
  };
  const auto names_file = Catch::Contains(bad);

  SECTION("bad magic") {
    REQUIRE_THROWS_WITH(open_bad(llmc_bytes(ids, 20240522)),
                        names_file && Catch::Contains("expected llm.c magic 20240520") &&
                            Catch::Contains("got 20240522"));
  }
  SECTION("bad version") {
    REQUIRE_THROWS_WITH(open_bad(llmc_bytes(ids, kLlmcMagic, 2)),
                        names_file && Catch::Contains("expected llm.c token file version 1") &&
                            Catch::Contains("got 2"));
  }
  SECTION("count larger than the file: truncated") {
    REQUIRE_THROWS_WITH(open_bad(llmc_bytes(ids, kLlmcMagic, 1, 101)),
                        names_file && Catch::Contains("to hold 101 tokens") &&
                            Catch::Contains("got 1224 bytes") && Catch::Contains("truncated"));
  }
  SECTION("count smaller than the file: trailing bytes") {
    REQUIRE_THROWS_WITH(
        open_bad(llmc_bytes(ids, kLlmcMagic, 1, 99)),
        names_file && Catch::Contains("to hold 99 tokens") && Catch::Contains("trailing bytes"));
  }
  SECTION("negative count") {
    REQUIRE_THROWS_WITH(open_bad(llmc_bytes(ids, kLlmcMagic, 1, 0xFFFFFFFFll)),
                        names_file && Catch::Contains("count >= 0") && Catch::Contains("got -1"));
  }
  SECTION("shorter than the header") {
    REQUIRE_THROWS_WITH(open_bad(llmc_bytes(ids).substr(0, 500)),
                        names_file && Catch::Contains("at least llm.c's 1024-byte header") &&
                            Catch::Contains("got 500 bytes"));
  }
  SECTION("empty file") {
    REQUIRE_THROWS_WITH(open_bad(""), names_file && Catch::Contains("the file is empty"));
  }
  SECTION("id at or above the vocab size: at open, or lazily on read") {
    std::vector<uint16_t> over = ids;
    over[42] = 1000;
    REQUIRE_THROWS_WITH(open_bad(llmc_bytes(over)),
                        names_file && Catch::Contains("below the vocab size 1000") &&
                            Catch::Contains("got 1000 at token 42"));
    const TokenFile lazy = open_bad(llmc_bytes(over), 1000, false);
    std::vector<int64_t> out(10);
    CHECK_NOTHROW(lazy.read(0, out));
    REQUIRE_THROWS_WITH(lazy.read(40, out), names_file && Catch::Contains("got 1000 at token 42"));
  }
  SECTION("no vocab size to check the ids against") {
    REQUIRE_THROWS_WITH(open_bad(llmc_bytes(ids), 0),
                        names_file && Catch::Contains("expected a vocab size > 0"));
  }
}

TEST_CASE("u16 file errors name the file and what was expected", "[token_format]") {
  ScratchDir dir;
  const std::string bad = dir.file("bad.bin");
  const auto open_bad = [&](const std::string& bytes) {
    write_file(bad, bytes);
    return open_as(bad, TokenFormat::u16, 300);
  };
  const auto names_file = Catch::Contains(bad);
  REQUIRE_THROWS_WITH(open_bad(""), names_file && Catch::Contains("at least one u16 token id") &&
                                        Catch::Contains("the file is empty"));
  REQUIRE_THROWS_WITH(
      open_bad(u16_bytes({1, 2, 3}) + "x"),
      names_file && Catch::Contains("an even number of bytes") && Catch::Contains("got 7 bytes"));
  REQUIRE_THROWS_WITH(open_bad(u16_bytes({1, 2, 300, 4})),
                      names_file && Catch::Contains("below the vocab size 300") &&
                          Catch::Contains("got 300 at token 2"));
  CHECK(open_bad(u16_bytes({299})).size() == 1);
}

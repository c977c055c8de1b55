// Every malformed or truncated safetensors file ends in a ValueError naming the file, the tensor
// and what is wrong, never a crash.
#include <catch2/catch.hpp>
#include <filesystem>

#include "core/factory.h"
#include "models/io/safetensors.h"
#include "tests/models/io/io_test_util.h"

using namespace tessera;
using namespace tessera::io;
using namespace tessera::io::testing;

namespace {

std::string write_case(const std::string& bytes) {
  static int counter = 0;
  std::string path =
      scratch_dir("st-corrupt") + "/case" + std::to_string(counter++) + ".safetensors";
  write_bytes(path, bytes);
  return path;
}

// Requires open() of these exact bytes to fail with "[safetensors] <path>: " and the fragments.
void require_rejected_bytes(const std::string& bytes, const std::vector<std::string>& fragments) {
  std::string path = write_case(bytes);
  std::vector<std::string> all = fragments;
  all.push_back("[safetensors] " + path + ": ");
  require_throws_with([&] { SafetensorsFile::open(path); }, all);
}

void require_rejected(const std::string& header, const std::string& data,
                      const std::vector<std::string>& fragments) {
  require_rejected_bytes(raw_safetensors(header, data), fragments);
}

std::string entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
         ",\"data_offsets\":" + offsets + "}";
}

std::string obj(const std::string& a, const std::string& b = "") {
  return "{" + a + (b.empty() ? "" : "," + b) + "}";
}

}  // namespace

TEST_CASE("safetensors helper bytes are valid when nothing is wrong", "[safetensors]") {
  std::string path =
      write_case(raw_safetensors(obj(entry("w", "F32", "[2]", "[0,8]")), std::string(8, '\0')));
  CHECK(SafetensorsFile::open(path).names() == std::vector<std::string>{"w"});
  path = write_case(raw_safetensors("{}      ", ""));
  CHECK(SafetensorsFile::open(path).names().empty());
}

TEST_CASE("safetensors rejects files too short or with a bad header length", "[safetensors]") {
  for (size_t n : {0, 1, 7}) {
    require_rejected_bytes(std::string(n, '\0'), {"is " + std::to_string(n) +
                                                  " bytes, shorter than the 8-byte header length"});
  }
  // Length 1000 but only 10 bytes follow.
  require_rejected_bytes(std::string("\xE8\x03\0\0\0\0\0\0", 8) + "{}        ",
                         {"header length 1000 is larger than the 10 bytes after the length field"});
  // An absurd length (2^32) is refused before anything is allocated or parsed.
  require_rejected_bytes(std::string("\0\0\0\0\x01\0\0\0", 8) + "{}",
                         {"header length 4294967296 exceeds the limit of 100000000 bytes"});
  require_rejected_bytes(std::string("\x01\0\0\0\0\0\0\0", 8) + "{",
                         {"too short to hold a JSON object"});
  require_rejected_bytes(std::string(1, '\0') + std::string("\0\0\0\0\0\0\0", 7), {"too short"});
  require_throws_with([] { SafetensorsFile::open("/nonexistent/dir/x.safetensors"); },
                      {"[safetensors] /nonexistent/dir/x.safetensors: cannot open"});
  std::string dir = scratch_dir("st-dir");
  require_throws_with([&] { SafetensorsFile::open(dir); }, {dir, "not a regular file"});
}

TEST_CASE("safetensors rejects headers that are not the spec's JSON", "[safetensors]") {
  require_rejected("{\"a\": {\"dtype\": ", "", {"header is not valid JSON"});
  require_rejected("{\"a\xFF\": 1}", "", {"header is not valid JSON"});  // invalid UTF-8
  require_rejected("[1, 2, 3]", "", {"expected the header to be a JSON object, got array"});
  require_rejected("{\"w\": 5}", "",
                   {"tensor 'w'", "expected an object with dtype, shape and data_offsets"});
  require_rejected("{\"w\": {\"dtype\": \"F32\", \"shape\": [1]}}", "",
                   {"tensor 'w'", "missing field 'data_offsets'"});
  require_rejected(obj(entry("w", "F32", "[1]", "[0,4]"), entry("w", "F32", "[1]", "[4,8]")),
                   std::string(8, '\0'), {"tensor 'w' appears twice in the header"});
  require_rejected(
      "{\"w\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
      std::string(4, '\0'), {"tensor 'w'", "key 'dtype' appears twice"});
}

TEST_CASE("safetensors rejects bad dtypes and shapes", "[safetensors]") {
  std::string d4(4, '\0');
  require_rejected(obj(entry("w", "F33", "[1]", "[0,4]")), d4,
                   {"tensor 'w'", "unknown dtype 'F33'"});
  require_rejected("{\"w\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}", d4,
                   {"tensor 'w'", "expected dtype to be a string, got 7"});
  require_rejected(obj(entry("w", "F32", "[2, -1]", "[0,4]")), d4,
                   {"tensor 'w'", "shape [2, -1] has a negative dimension"});
  require_rejected(obj(entry("w", "F32", "[2.5]", "[0,4]")), d4,
                   {"tensor 'w'", "non-integer dimension 2.5"});
  require_rejected(obj(entry("w", "F32", "{}", "[0,4]")), d4,
                   {"tensor 'w'", "expected shape to be an array"});
  require_rejected(obj(entry("w", "F32", "[4294967296, 4294967296]", "[0,4]")), d4,
                   {"tensor 'w'", "has more bytes than any file"});
}

TEST_CASE("safetensors rejects bad data_offsets", "[safetensors]") {
  std::string d16(16, '\0');
  for (const char* bad : {"[0]", "[0,\"4\"]", "[0,4,8]", "[0.0,4]", "[-4,4]", "{}"}) {
    require_rejected(obj(entry("w", "F32", "[1]", bad)), std::string(4, '\0'),
                     {"tensor 'w'", "expected data_offsets to be two non-negative integers"});
  }
  require_rejected(obj(entry("w", "F32", "[1]", "[8,4]")), d16,
                   {"tensor 'w'", "data_offsets [8, 4] end before they begin"});
  require_rejected(obj(entry("wte.weight", "BF16", "[2,2]", "[0,12]")), std::string(12, '\0'),
                   {"tensor 'wte.weight': data_offsets [0, 12] hold 12 bytes, expected 8 for shape "
                    "(2, 2) BF16"});
  require_rejected(obj(entry("w", "F32", "[4]", "[0,16]")), std::string(8, '\0'),
                   {"tensor 'w'", "data_offsets [0, 16] reach past the data buffer of 8 bytes"});
}

TEST_CASE("safetensors requires tensors to tile the buffer", "[safetensors]") {
  require_rejected(obj(entry("a", "F32", "[2]", "[0,8]"), entry("b", "F32", "[2]", "[4,12]")),
                   std::string(12, '\0'),
                   {"tensor 'b'", "data_offsets [4, 12] overlap tensor 'a', which ends at 8"});
  require_rejected(obj(entry("a", "F32", "[1]", "[0,4]"), entry("b", "F32", "[1]", "[8,12]")),
                   std::string(12, '\0'),
                   {"tensor 'b'", "leave a gap: bytes [4, 8) belong to no tensor"});
  require_rejected(obj(entry("a", "F32", "[1]", "[4,8]")), std::string(8, '\0'),
                   {"tensor 'a'", "bytes [0, 4) belong to no tensor"});
  require_rejected(obj(entry("a", "F32", "[1]", "[0,4]")), std::string(9, '\0'),
                   {"bytes [4, 9) at the end of the data buffer belong to no tensor"});
  // Zero-size tensors may sit at any boundary.
  std::string ok = write_case(
      raw_safetensors(obj(entry("a", "F32", "[1]", "[0,4]"), entry("z", "F32", "[0, 3]", "[4,4]")),
                      std::string(4, '\0')));
  CHECK(SafetensorsFile::open(ok).get("z").shape() == Shape{0, 3});
}

TEST_CASE("safetensors rejects bad metadata and bad BOOL bytes", "[safetensors]") {
  require_rejected("{\"__metadata__\":{\"k\":1}}", "",
                   {"__metadata__ 'k': expected a string value, got number 1"});
  require_rejected("{\"__metadata__\":[\"k\"]}", "",
                   {"expected __metadata__ to be an object of strings"});
  std::string path = write_case(
      raw_safetensors(obj(entry("m", "BOOL", "[3]", "[0,3]")), std::string("\x01\x02\x00", 3)));
  SafetensorsFile f = SafetensorsFile::open(path);
  require_throws_with([&] { f.get("m"); },
                      {path, "tensor 'm'", "BOOL byte 1 is 2, expected 0 or 1"});
}

TEST_CASE("safetensors rejects truncated and byte-edited files", "[safetensors]") {
  std::string dir = scratch_dir("st-edit");
  std::string good_path = dir + "/good.safetensors";
  save_safetensors(good_path,
                   {{"emb", ones({4, 2}, {})}, {"bias", ones({3}, {.dtype = DType::bf16})}});
  const std::string good = read_bytes(good_path);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(uint8_t(good[i])) << (8 * i);
  REQUIRE(good.size() == 8 + n + 32 + 6);

  require_rejected_bytes(good.substr(0, 4), {"shorter than the 8-byte header length"});
  require_rejected_bytes(good.substr(0, 8 + n / 2), {"is larger than the"});
  require_rejected_bytes(good.substr(0, 8 + n),
                         {"tensor '", "reach past the data buffer of 0 bytes"});
  require_rejected_bytes(
      good.substr(0, good.size() - 1),
      {"tensor 'bias'", "data_offsets [32, 38] reach past the data buffer of 37 bytes"});
  require_rejected_bytes(good + "x",
                         {"bytes [38, 39) at the end of the data buffer belong to no tensor"});

  std::string edited = good;
  edited[7] = '\x01';  // the length field's top byte
  require_rejected_bytes(edited, {"exceeds the limit"});

  edited = good;
  size_t dt = edited.find("\"BF16\"");
  REQUIRE(dt != std::string::npos);
  edited[dt + 4] = '7';  // "BF17"
  require_rejected_bytes(edited, {"tensor 'bias'", "unknown dtype 'BF17'"});

  edited = good;
  size_t off = edited.find("[32,38]");
  REQUIRE(off != std::string::npos);
  edited[off + 5] = '6';  // [32,36]
  require_rejected_bytes(
      edited,
      {"tensor 'bias'", "data_offsets [32, 36] hold 4 bytes, expected 6 for shape (3) BF16"});

  edited = good;
  size_t shape = edited.find("[4,2]");
  REQUIRE(shape != std::string::npos);
  edited[shape + 1] = '5';
  require_rejected_bytes(edited,
                         {"tensor 'emb'", "hold 32 bytes, expected 40 for shape (5, 2) F32"});

  edited = good;
  edited[9] = '}';  // breaks the JSON right after its opening brace
  require_rejected_bytes(edited, {"header is not valid JSON"});
}

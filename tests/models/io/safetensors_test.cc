// safetensors round trips (every dtype, scalars, zero-size, non-contiguous input), the exact byte
// layout of a small file, metadata, zero-copy reads and foreign dtypes.
#include "models/io/safetensors.h"

#include <catch2/catch.hpp>
#include <cstring>

#include "core/factory.h"
#include "tests/models/io/io_test_util.h"
#include "tests/testing/compare.h"

using namespace tessera;
using namespace tessera::io;
using namespace tessera::io::testing;

namespace {

std::string bytes_of(const Tensor& t) {
  Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), size_t(c.numel()) * c.itemsize());
}

Tensor floats(const std::vector<float>& v, const Shape& shape, DType dtype) {
  return from_vector(v, shape, TensorOptions{.dtype = dtype});
}

}  // namespace

TEST_CASE("safetensors round trip keeps every dtype, shape and byte", "[safetensors]") {
  std::string dir = scratch_dir("st-roundtrip");
  std::vector<float> vals = {0.5f, -1.25f, 3.0f, 1e-3f, 65504.0f, -0.0f};
  NamedTensors in = {
      {"f32", floats(vals, {2, 3}, DType::f32)},
      {"f16", floats(vals, {3, 2}, DType::f16)},
      {"bf16", floats(vals, {6}, DType::bf16)},
      {"i32", from_vector<int32_t>({-7, 0, 2147483647, -2147483647 - 1}, {2, 2})},
      {"i64", from_vector<int64_t>({int64_t(1) << 40, -3, 5}, {3, 1})},
      {"bool", from_vector<bool>({true, false, true, true, false}, {5})},
      {"scalar_f32", scalar_tensor(2.5)},
      {"scalar_i64", scalar_tensor(-9, {.dtype = DType::i64})},
      {"empty_f32", zeros({0}, {})},
      {"empty_2d_bf16", zeros({3, 0, 2}, {.dtype = DType::bf16})},
      {"empty_bool", zeros({0, 4}, {.dtype = DType::b8})},
  };
  std::string path = dir + "/all.safetensors";
  save_safetensors(path, in, {{"format", "pt"}, {"note", "h\xC3\xA9llo"}});

  SafetensorsFile f = SafetensorsFile::open(path);
  REQUIRE(f.names().size() == in.size());
  CHECK(f.metadata() == Metadata{{"format", "pt"}, {"note", "h\xC3\xA9llo"}});
  for (const auto& [name, t] : in) {
    INFO(name);
    REQUIRE(f.contains(name));
    CHECK(f.info(name).dtype == safetensors_dtype_name(t.dtype()));
    CHECK(f.info(name).shape == t.shape());
    Tensor back = f.get(name);
    CHECK(back.dtype() == t.dtype());
    CHECK(back.shape() == t.shape());
    CHECK(back.device() == kCPU);
    CHECK(bytes_of(back) == bytes_of(t));
  }
  CHECK(f.get("scalar_i64").item() == -9.0);
  NamedTensors all = f.load_all();
  CHECK(all.size() == in.size());
}

TEST_CASE("safetensors saves non-contiguous and offset views as their row-major values",
          "[safetensors]") {
  std::string dir = scratch_dir("st-views");
  Tensor base = arange(0, 12, 1, {.dtype = DType::f32}).view({3, 4});
  Tensor transposed = base.transpose(0, 1);  // (4, 3)
  Tensor sliced = base.slice(1, 1, 4, 2);    // (3, 2), storage offset 1
  Tensor expanded = from_vector<int64_t>({4, 5}, {2, 1}).expand({2, 3});  // stride 0
  REQUIRE_FALSE(transposed.is_contiguous());
  std::string path = dir + "/views.safetensors";
  save_safetensors(path, {{"t", transposed}, {"s", sliced}, {"e", expanded}});

  SafetensorsFile f = SafetensorsFile::open(path);
  tessera::testing::require_close(f.get("t"), transposed, 0, 0);
  CHECK(tessera::testing::to_doubles(f.get("t")) ==
        std::vector<double>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  CHECK(tessera::testing::to_doubles(f.get("s")) == std::vector<double>{1, 3, 5, 7, 9, 11});
  CHECK(tessera::testing::to_doubles(f.get("e")) == std::vector<double>{4, 4, 4, 5, 5, 5});
}

TEST_CASE("safetensors writes the spec's exact bytes for a small file", "[safetensors]") {
  std::string dir = scratch_dir("st-bytes");
  std::string path = dir + "/small.safetensors";
  // Insertion order b, a: the writer puts the 4-byte F32 first, then the 1-byte BOOL.
  save_safetensors(path,
                   {{"b", from_vector<bool>({true, false, true}, {3})},
                    {"a", from_vector<float>({1.0f, -2.0f}, {2})}},
                   {{"k", "v"}});
  // Header: 134 bytes of JSON, padded with 2 spaces to 136 = 0x88 so data starts at 144.
  std::string header =
      "{\"__metadata__\":{\"k\":\"v\"},"
      "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
      "\"b\":{\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[8,11]}}  ";
  std::string expected = std::string("\x88\0\0\0\0\0\0\0", 8) + header +
                         std::string("\x00\x00\x80\x3F", 4) +  // 1.0f little-endian
                         std::string("\x00\x00\x00\xC0", 4) +  // -2.0f
                         std::string("\x01\x00\x01", 3);
  REQUIRE(header.size() == 136);
  std::string got = read_bytes(path);
  CHECK(got.size() == 155);
  CHECK(got == expected);
}

TEST_CASE("safetensors output is deterministic and 8-byte aligned", "[safetensors]") {
  std::string dir = scratch_dir("st-determinism");
  NamedTensors a = {{"x", ones({3}, {.dtype = DType::bf16})},
                    {"y", ones({1}, {.dtype = DType::i64})},
                    {"z", ones({2}, {.dtype = DType::b8})},
                    {"w", ones({5}, {})}};
  NamedTensors b = {a[3], a[2], a[1], a[0]};
  save_safetensors(dir + "/a.safetensors", a);
  save_safetensors(dir + "/b.safetensors", b);
  std::string fa = read_bytes(dir + "/a.safetensors");
  CHECK(fa == read_bytes(dir + "/b.safetensors"));
  uint64_t n = 0;
  std::memcpy(&n, fa.data(), 8);
  CHECK((8 + n) % 8 == 0);
  SafetensorsFile f = SafetensorsFile::open(dir + "/a.safetensors");
  CHECK(f.names() == std::vector<std::string>{"y", "w", "x", "z"});  // I64, F32, BF16, BOOL
  for (const std::string& name : f.names()) {
    INFO(name);
    CHECK(f.info(name).begin % dtype_size(*safetensors_to_dtype(f.info(name).dtype)) == 0);
  }
}

TEST_CASE("safetensors get shares the mapping copy-on-write and outlives the file object",
          "[safetensors]") {
  std::string dir = scratch_dir("st-mmap");
  std::string path = dir + "/m.safetensors";
  save_safetensors(path, {{"w", from_vector<float>({1, 2, 3, 4}, {2, 2})}});
  std::string before = read_bytes(path);
  Tensor t;
  {
    SafetensorsFile f = SafetensorsFile::open(path);
    t = f.get("w");
    Tensor again = f.get("w");
    CHECK(again.data_ptr() == t.data_ptr());  // both views of the one mapping
  }
  // The file object is gone; the tensor keeps the mapping alive and may be written.
  t.fill_(7.0);
  CHECK(tessera::testing::to_doubles(t) == std::vector<double>{7, 7, 7, 7});
  CHECK(read_bytes(path) == before);
  CHECK(tessera::testing::to_doubles(SafetensorsFile::open(path).get("w")) ==
        std::vector<double>{1, 2, 3, 4});
}

TEST_CASE("safetensors reads foreign dtypes and unaligned offsets", "[safetensors]") {
  std::string dir = scratch_dir("st-foreign");
  std::string path = dir + "/f.safetensors";
  // A U8 of 1 byte puts the F32 at offset 1: legal per the spec, read through a copy.
  std::string header =
      "{\"u\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
      "\"f\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[1,5]},"
      "\"d\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[5,13]}}";
  std::string data =
      std::string("\x09", 1) + std::string("\x00\x00\x40\x40", 4) + std::string(8, '\0');
  write_bytes(path, raw_safetensors(header, data));
  SafetensorsFile f = SafetensorsFile::open(path);
  CHECK(f.get("f").item() == 3.0);
  CHECK(f.info("u").dtype == "U8");
  CHECK(f.info("d").shape.empty());
  require_throws_with([&] { f.get("d"); }, {path, "tensor 'd'", "F64", "does not compute in"});
  require_throws_with([&] { f.info("nope"); }, {path, "no tensor named 'nope'"});
}

TEST_CASE("safetensors save rejects bad names", "[safetensors]") {
  std::string dir = scratch_dir("st-names");
  std::string path = dir + "/n.safetensors";
  Tensor t = ones({1});
  require_throws_with(
      [&] {
        save_safetensors(path, {{"a", t}, {"a", t}});
      },
      {"tensor 'a' is listed twice"});
  require_throws_with([&] { save_safetensors(path, {{"__metadata__", t}}); }, {"reserved"});
  require_throws_with([&] { save_safetensors(path, {{"", t}}); }, {"non-empty"});
  require_throws_with(
      [&] {
        save_safetensors(path, {{"u", Tensor()}});
      },
      {"tensor 'u' is undefined"});
  require_throws_with([&] { save_safetensors(path, {{"bad\xFF", t}}); }, {"UTF-8"});
  CHECK(list_dir(dir).empty());
}

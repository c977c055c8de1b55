// The C++ side of python_interop_test: `write PATH` writes a known file for python_interop.py to
// parse; `check PATH` verifies the known file python_interop.py wrote from the spec. Exit 0 and
// "OK" on success; a message and exit 1 otherwise.
#include <cmath>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "core/factory.h"
#include "models/io/safetensors.h"

using namespace tessera;
using namespace tessera::io;

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "MISMATCH: %s\n", what.c_str());
    ++failures;
  }
}

std::vector<double> values(const Tensor& t) {
  Tensor c = t.contiguous();
  std::vector<double> out;
  dispatch_dtype(c.dtype(), [&]<typename T>() {
    const T* p = c.data<T>();
    for (int64_t i = 0; i < c.numel(); ++i) out.push_back(to_double(p[i]));
  });
  return out;
}

void expect_tensor(const SafetensorsFile& f, const std::string& name, DType dtype,
                   const Shape& shape, const std::vector<double>& want) {
  if (!f.contains(name)) {
    expect(false, "missing tensor " + name);
    return;
  }
  Tensor t = f.get(name);
  expect(t.dtype() == dtype, name + " dtype " + dtype_name(t.dtype()));
  expect(t.shape() == shape, name + " shape " + shape_str(t.shape()));
  expect(values(t) == want, name + " values");
}

void write_known(const std::string& path) {
  std::vector<float> f32;
  for (int i = 0; i < 6; ++i) f32.push_back(float(i) * 0.5f - 1.0f);
  save_safetensors(
      path,
      {{"cpp.f32", from_vector(f32, {2, 3})},
       {"cpp.f16", from_vector({1.0f, -2.5f, 65504.0f, std::ldexp(1.0f, -14)}, {4},
                               TensorOptions{.dtype = DType::f16})},
       {"cpp.bf16", from_vector({1.0f, -3.0f, std::ldexp(1.0f, 100)}, {3},
                                TensorOptions{.dtype = DType::bf16})},
       {"cpp.i32", from_vector<int32_t>({-5, 7, 2147483647}, {3})},
       {"cpp.i64", from_vector<int64_t>({int64_t(1) << 40, -1}, {2, 1})},
       {"cpp.bool", from_vector<bool>({true, false, true}, {3})},
       {"cpp.scalar", scalar_tensor(3.25)},
       {"cpp.empty", zeros({0, 3})},
       // A non-contiguous view: the file must hold its row-major values 0, 3, 1, 4, 2, 5.
       {"cpp.transposed", arange(0, 6, 1, {.dtype = DType::f32}).view({2, 3}).transpose(0, 1)}},
      {{"producer", "tessera"}});
}

void check_python_file(const std::string& path) {
  SafetensorsFile f = SafetensorsFile::open(path);
  expect(f.metadata().size() == 1 && f.metadata().count("source") &&
             f.metadata().at("source") == "python-from-spec",
         "metadata");
  expect(f.names().size() == 9, "tensor count " + std::to_string(f.names().size()));
  std::vector<double> f32;
  for (int i = 0; i < 6; ++i) f32.push_back(i * 0.25);
  expect_tensor(f, "py.f32", DType::f32, {3, 2}, f32);
  expect_tensor(f, "py.f16", DType::f16, {2, 2}, {0.5, -1.0, 1024.0, std::ldexp(1.0, -24)});
  expect_tensor(f, "py.bf16", DType::bf16, {2}, {-0.15625, std::ldexp(1.0, 127)});
  expect_tensor(f, "py.i32", DType::i32, {2}, {-2147483648.0, 12345});
  expect_tensor(f, "py.i64", DType::i64, {3}, {-1, 0, std::ldexp(1.0, 62)});
  expect_tensor(f, "py.bool", DType::b8, {2, 2}, {1, 0, 0, 1});
  expect_tensor(f, "py.scalar", DType::f32, {}, {-7.5});
  expect_tensor(f, "py.empty", DType::f32, {2, 0}, {});
  expect(f.info("py.u8").dtype == "U8" && f.info("py.u8").shape == Shape{1}, "py.u8 info");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s write|check PATH\n", argv[0]);
    return 2;
  }
  std::string cmd = argv[1], path = argv[2];
  try {
    if (cmd == "write") {
      write_known(path);
    } else if (cmd == "check") {
      check_python_file(path);
    } else {
      std::fprintf(stderr, "unknown command %s\n", cmd.c_str());
      return 2;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  if (failures) return 1;
  std::printf("OK\n");
  return 0;
}

// safetensors dtype names and the writer (see safetensors.h for the layout it produces).
#include "models/io/safetensors.h"

#include <algorithm>
#include <bit>
#include <nlohmann/json.hpp>
#include <set>

#include "models/io/atomic_file.h"

namespace tessera::io {

static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian bytes; Tessera writes memory as is");

namespace {

constexpr const char* kOp = "safetensors";

struct SpecDType {
  const char* name;
  size_t size;
};
// Every whole-byte dtype of the spec (sub-byte F4/F6 types are not readable as byte ranges).
constexpr SpecDType kSpecDTypes[] = {
    {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1},
    {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},     {"U32", 4},
    {"F32", 4},  {"F64", 8}, {"I64", 8}, {"U64", 8},     {"C64", 8},
};

}  // namespace

const char* safetensors_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "F32";
    case DType::f16:
      return "F16";
    case DType::bf16:
      return "BF16";
    case DType::i32:
      return "I32";
    case DType::i64:
      return "I64";
    case DType::b8:
      return "BOOL";
  }
  TS_FAIL(kOp, "expected a Tessera dtype, got code ", int(dtype));
}

std::optional<size_t> safetensors_dtype_size(const std::string& name) {
  for (const SpecDType& d : kSpecDTypes) {
    if (name == d.name) return d.size;
  }
  return std::nullopt;
}

std::optional<DType> safetensors_to_dtype(const std::string& name) {
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64, DType::b8}) {
    if (name == safetensors_dtype_name(t)) return t;
  }
  return std::nullopt;
}

void validate_tensor_names(const NamedTensors& tensors, const std::string& path) {
  std::set<std::string> seen;
  for (const auto& [name, t] : tensors) {
    TS_CHECK(!name.empty(), kOp, path, ": expected non-empty tensor names, got an empty one");
    TS_CHECK(name != "__metadata__", kOp, path,
             ": tensor name '__metadata__' is reserved for the metadata entry");
    TS_CHECK(seen.insert(name).second, kOp, path, ": tensor '", name, "' is listed twice");
    TS_CHECK(t.defined(), kOp, path, ": tensor '", name, "' is undefined");
  }
}

SafetensorsLayout plan_safetensors(const NamedTensors& tensors, const Metadata& metadata,
                                   const std::string& path) {
  validate_tensor_names(tensors, path);
  SafetensorsLayout layout;
  for (const auto& [name, t] : tensors) {
    Tensor c = t.device().is_cpu() ? t : t.to(kCPU);
    layout.ordered.emplace_back(name, c.contiguous());
  }
  // Largest element size first keeps every offset a multiple of its element size.
  std::stable_sort(layout.ordered.begin(), layout.ordered.end(), [](const auto& a, const auto& b) {
    if (a.second.itemsize() != b.second.itemsize())
      return a.second.itemsize() > b.second.itemsize();
    return a.first < b.first;
  });

  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = std::move(meta);
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : layout.ordered) {
    uint64_t nbytes = uint64_t(t.numel()) * t.itemsize();
    header[name] = {{"dtype", safetensors_dtype_name(t.dtype())},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  layout.data_bytes = offset;
  try {
    layout.header = header.dump();
  } catch (const nlohmann::json::exception& e) {
    TS_FAIL(kOp, path, ": tensor names and metadata must be valid UTF-8: ", e.what());
  }
  // Readers (ours and the reference) refuse longer headers; never write a file they reject.
  TS_CHECK(layout.header.size() <= SafetensorsFile::kMaxHeaderBytes, kOp, path, ": header of ",
           layout.header.size(),
           " bytes exceeds the format's 100000000-byte limit (too many tensors for one file)");
  // 8 length bytes + header: pad so the data buffer starts 8-byte aligned.
  layout.header.append((8 - layout.header.size() % 8) % 8, ' ');
  return layout;
}

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const Metadata& metadata) {
  SafetensorsLayout layout = plan_safetensors(tensors, metadata, path);
  AtomicFileWriter out(path);
  uint64_t n = layout.header.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
  out.write(len, 8);
  out.write(layout.header);
  for (const auto& [name, t] : layout.ordered) {
    out.write(t.data_ptr(), size_t(t.numel()) * t.itemsize());
  }
  out.commit();
}

}  // namespace tessera::io

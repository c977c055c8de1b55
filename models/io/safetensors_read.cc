// SafetensorsFile: memory-maps a safetensors file and validates every header field before any
// tensor is handed out (see safetensors.h).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "core/factory.h"
#include "models/io/safetensors.h"

namespace tessera::io {
namespace {

constexpr const char* kOp = "safetensors";
using json = nlohmann::json;

std::string join_shape(const json& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + shape[i].dump();
  return s + "]";
}

// The header as JSON, with duplicate keys (which JSON parsers silently collapse) reported.
json parse_header(const std::string& path, const std::string& text) {
  std::vector<std::set<std::string>> keys;  // one set per open object
  std::string top_key, duplicate, duplicate_in;
  auto cb = [&](int depth, json::parse_event_t ev, json& parsed) {
    if (ev == json::parse_event_t::object_start) keys.emplace_back();
    if (ev == json::parse_event_t::object_end) keys.pop_back();
    if (ev == json::parse_event_t::key) {
      std::string k = parsed.get<std::string>();
      if (depth == 1) top_key = k;
      if (!keys.empty() && !keys.back().insert(k).second && duplicate.empty()) {
        duplicate = k;
        duplicate_in = depth == 1 ? "" : top_key;
      }
    }
    return true;
  };
  json header;
  try {
    header = json::parse(text, cb);
  } catch (const json::exception& e) {
    TS_FAIL(kOp, path, ": header is not valid JSON: ", e.what());
  }
  if (!duplicate.empty()) {
    if (duplicate_in.empty())
      TS_FAIL(kOp, path, ": tensor '", duplicate, "' appears twice in the header");
    TS_FAIL(kOp, path, ": tensor '", duplicate_in, "': key '", duplicate, "' appears twice");
  }
  TS_CHECK(header.is_object(), kOp, path, ": expected the header to be a JSON object, got ",
           header.type_name());
  return header;
}

Metadata parse_metadata(const std::string& path, const json& meta) {
  TS_CHECK(meta.is_object(), kOp, path, ": expected __metadata__ to be an object of strings, got ",
           meta.type_name());
  Metadata out;
  for (const auto& [k, v] : meta.items()) {
    TS_CHECK(v.is_string(), kOp, path, ": __metadata__ '", k, "': expected a string value, got ",
             v.type_name(), " ", v.dump());
    out[k] = v.get<std::string>();
  }
  return out;
}

TensorInfo parse_entry(const std::string& path, const std::string& name, const json& e,
                       uint64_t buffer_bytes) {
  std::string where = str_cat(path, ": tensor '", name, "'");
  TS_CHECK(e.is_object(), kOp, where,
           ": expected an object with dtype, shape and data_offsets, got ", e.type_name(), " ",
           e.dump());
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    TS_CHECK(e.contains(field), kOp, where, ": missing field '", field, "'");
  }
  TensorInfo info;
  const json& dt = e["dtype"];
  TS_CHECK(dt.is_string(), kOp, where, ": expected dtype to be a string, got ", dt.dump());
  info.dtype = dt.get<std::string>();
  std::optional<size_t> esize = safetensors_dtype_size(info.dtype);
  TS_CHECK(esize, kOp, where, ": unknown dtype '", info.dtype, "'");

  const json& shape = e["shape"];
  TS_CHECK(shape.is_array(), kOp, where, ": expected shape to be an array, got ", shape.dump());
  uint64_t numel = 1;
  bool overflow = false, has_zero = false;
  for (const json& d : shape) {
    TS_CHECK(d.is_number_integer(), kOp, where, ": shape ", join_shape(shape),
             " holds a non-integer dimension ", d.dump());
    TS_CHECK(d.is_number_unsigned(), kOp, where, ": shape ", join_shape(shape),
             " has a negative dimension");
    uint64_t v = d.get<uint64_t>();
    TS_CHECK(v <= uint64_t(INT64_MAX), kOp, where, ": shape ", join_shape(shape), " is too large");
    info.shape.push_back(int64_t(v));
    if (v == 0) has_zero = true;
    if (v != 0 && numel > UINT64_MAX / v) overflow = true;
    numel *= v;
  }
  if (has_zero) overflow = false, numel = 0;
  TS_CHECK(!overflow && numel <= UINT64_MAX / *esize, kOp, where, ": shape ", join_shape(shape),
           " has more bytes than any file");

  const json& off = e["data_offsets"];
  TS_CHECK(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() &&
               off[1].is_number_unsigned(),
           kOp, where, ": expected data_offsets to be two non-negative integers [begin, end], got ",
           off.dump());
  info.begin = off[0].get<uint64_t>();
  info.end = off[1].get<uint64_t>();
  TS_CHECK(info.end >= info.begin, kOp, where, ": data_offsets [", info.begin, ", ", info.end,
           "] end before they begin");
  TS_CHECK(info.end <= buffer_bytes, kOp, where, ": data_offsets [", info.begin, ", ", info.end,
           "] reach past the data buffer of ", buffer_bytes, " bytes (file truncated?)");
  uint64_t expected = numel * *esize;
  TS_CHECK(info.end - info.begin == expected, kOp, where, ": data_offsets [", info.begin, ", ",
           info.end, "] hold ", info.end - info.begin, " bytes, expected ", expected, " for shape ",
           shape_str(info.shape), " ", info.dtype);
  return info;
}

}  // namespace

struct SafetensorsFile::Mapping {
  void* base = nullptr;
  size_t length = 0;
  ~Mapping() {
    if (base) ::munmap(base, length);
  }
};

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  SafetensorsFile f;
  f.path_ = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  TS_CHECK(fd >= 0, kOp, path, ": cannot open: ", std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    TS_FAIL(kOp, path, ": not a regular file");
  }
  uint64_t file_bytes = uint64_t(st.st_size);
  if (file_bytes < 8) {
    ::close(fd);
    TS_FAIL(kOp, path, ": file is ", file_bytes,
            " bytes, shorter than the 8-byte header length (truncated?)");
  }
  // Private and writable: tensors handed out may be modified in place (copy-on-write) without
  // touching the file or faulting on read-only pages.
  void* base = ::mmap(nullptr, file_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  int err = errno;
  ::close(fd);
  TS_CHECK(base != MAP_FAILED, kOp, path, ": cannot mmap ", file_bytes,
           " bytes: ", std::strerror(err));
  f.mapping_ = std::make_shared<Mapping>();
  f.mapping_->base = base;
  f.mapping_->length = file_bytes;
  const uint8_t* bytes = static_cast<const uint8_t*>(base);

  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(bytes[i]) << (8 * i);
  TS_CHECK(n <= kMaxHeaderBytes, kOp, path, ": header length ", n, " exceeds the limit of ",
           kMaxHeaderBytes, " bytes (not a safetensors file?)");
  TS_CHECK(n <= file_bytes - 8, kOp, path, ": header length ", n, " is larger than the ",
           file_bytes - 8, " bytes after the length field (truncated?)");
  TS_CHECK(n >= 2, kOp, path, ": header length ", n, " is too short to hold a JSON object");
  uint64_t buffer_bytes = file_bytes - 8 - n;
  f.data_ = bytes + 8 + n;

  json header = parse_header(path, std::string(reinterpret_cast<const char*>(bytes + 8), n));
  std::vector<std::pair<std::string, TensorInfo>> entries;
  for (const auto& [name, e] : header.items()) {
    if (name == "__metadata__") {
      f.metadata_ = parse_metadata(path, e);
      continue;
    }
    entries.emplace_back(name, parse_entry(path, name, e, buffer_bytes));
  }

  // The spec requires the tensors to tile the buffer exactly: no overlap, no gap, no tail.
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    if (a.second.begin != b.second.begin) return a.second.begin < b.second.begin;
    if (a.second.end != b.second.end) return a.second.end < b.second.end;
    return a.first < b.first;
  });
  uint64_t expected = 0;
  const std::string* prev = nullptr;
  for (const auto& [name, info] : entries) {
    TS_CHECK(info.begin >= expected, kOp, path, ": tensor '", name, "': data_offsets [", info.begin,
             ", ", info.end, "] overlap tensor '", *prev, "', which ends at ", expected);
    TS_CHECK(info.begin == expected, kOp, path, ": tensor '", name, "': data_offsets [", info.begin,
             ", ", info.end, "] leave a gap: bytes [", expected, ", ", info.begin,
             ") belong to no tensor");
    if (info.end > info.begin || prev == nullptr) prev = &name;
    expected = info.end;
  }
  TS_CHECK(expected == buffer_bytes, kOp, path, ": bytes [", expected, ", ", buffer_bytes,
           ") at the end of the data buffer belong to no tensor");
  for (auto& [name, info] : entries) {
    f.names_.push_back(name);
    f.infos_.emplace(name, std::move(info));
  }
  return f;
}

const TensorInfo& SafetensorsFile::info(const std::string& name) const {
  auto it = infos_.find(name);
  TS_CHECK(it != infos_.end(), kOp, path_, ": no tensor named '", name, "' (the file holds ",
           names_.size(), " tensors)");
  return it->second;
}

Tensor SafetensorsFile::get(const std::string& name) const {
  const TensorInfo& in = info(name);
  std::optional<DType> dtype = safetensors_to_dtype(in.dtype);
  TS_CHECK(dtype, kOp, path_, ": tensor '", name, "' has dtype ", in.dtype,
           ", which Tessera does not compute in (F32, F16, BF16, I32, I64, BOOL)");
  const uint8_t* src = data_ + in.begin;
  size_t nbytes = size_t(in.end - in.begin);
  if (*dtype == DType::b8) {
    const uint8_t* bad = std::find_if(src, src + nbytes, [](uint8_t b) { return b > 1; });
    TS_CHECK(bad == src + nbytes, kOp, path_, ": tensor '", name, "': BOOL byte ", bad - src,
             " is ", int(*bad), ", expected 0 or 1");
  }
  if (nbytes == 0) return empty(in.shape, {.dtype = *dtype});
  if (reinterpret_cast<uintptr_t>(src) % dtype_size(*dtype) != 0) {
    Tensor t = empty(in.shape, {.dtype = *dtype});
    std::memcpy(t.data_ptr(), src, nbytes);
    return t;
  }
  std::shared_ptr<Mapping> keep = mapping_;
  auto storage = std::make_shared<Storage>(const_cast<uint8_t*>(src), nbytes, kCPU,
                                           [keep](void*) mutable { keep.reset(); });
  return Tensor(std::move(storage), in.shape, contiguous_strides(in.shape), 0, *dtype);
}

NamedTensors SafetensorsFile::load_all() const {
  NamedTensors out;
  out.reserve(names_.size());
  for (const std::string& name : names_) out.emplace_back(name, get(name));
  return out;
}

}  // namespace tessera::io

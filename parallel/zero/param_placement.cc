// Chunk packing and placement decisions for stage 3's parameters (see param_placement.h).
#include "parallel/zero/param_placement.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"

namespace tessera::parallel::zero {

std::vector<ChunkRange> pack_chunks(const std::vector<ShardPiece>& pieces, int64_t capacity) {
  TS_CHECK(capacity >= 1, "zero", "expected a chunk capacity of at least 1 element, got ", capacity);
  std::vector<ChunkRange> chunks;
  for (const ShardPiece& p : pieces) {
    if (p.numel == 0) continue;
    ChunkRange* last = chunks.empty() ? nullptr : &chunks.back();
    const bool joins = last && last->begin + last->numel == p.shard_offset &&
                       last->numel + p.numel <= capacity;
    if (joins)
      last->numel += p.numel;
    else
      chunks.push_back({.begin = p.shard_offset, .numel = p.numel});
  }
  return chunks;
}

int64_t search_chunk_capacity(const std::vector<ShardPiece>& pieces, int64_t min_capacity,
                              int64_t max_capacity, int64_t step) {
  TS_CHECK(min_capacity >= 1 && min_capacity <= max_capacity && step >= 1, "zero",
           "expected a chunk capacity range 1 <= min <= max and a step of at least 1, got [",
           min_capacity, ", ", max_capacity, "] in steps of ", step);
  // Extra-large pieces (longer than the range, or than the mean + 3 standard deviations of the
  // pieces, as Gemini filters them: a token table) stand alone and do not set the start.
  double sum = 0, sum_sq = 0;
  for (const ShardPiece& p : pieces)
    sum += double(p.numel), sum_sq += double(p.numel) * double(p.numel);
  const double n = double(std::max<size_t>(pieces.size(), 1)), mean = sum / n;
  const double large = mean + 3 * std::sqrt(std::max(0.0, sum_sq / n - mean * mean));
  int64_t longest = 0;
  for (const ShardPiece& p : pieces)
    if (p.numel <= max_capacity && double(p.numel) <= large) longest = std::max(longest, p.numel);
  auto waste = [&](int64_t capacity) {
    int64_t w = 0;
    for (const ChunkRange& c : pack_chunks(pieces, capacity))
      if (c.numel < capacity) w += capacity - c.numel;
    return w;
  };
  int64_t best = 0, least = std::numeric_limits<int64_t>::max();
  for (int64_t capacity = std::max(min_capacity, longest);;
       capacity = std::min(capacity + step, max_capacity)) {
    const int64_t w = waste(capacity);
    if (w < least) least = w, best = capacity;
    if (capacity == max_capacity) break;
  }
  return best;
}

std::vector<bool> static_host_chunks(size_t count, double host_fraction) {
  TS_CHECK(host_fraction >= 0.0 && host_fraction <= 1.0, "zero",
           "expected a host fraction in [0, 1], got ", host_fraction);
  const size_t host = size_t(std::llround(host_fraction * double(count)));
  std::vector<bool> on_host(count, false);
  for (size_t c = count - std::min(host, count); c < count; ++c) on_host[c] = true;
  return on_host;
}

std::vector<bool> auto_device_chunks(const std::vector<size_t>& first_use,
                                     const std::vector<int64_t>& bytes, int64_t budget) {
  TS_CHECK(first_use.size() == bytes.size(), "zero", "expected a first use per chunk (",
           bytes.size(), "), got ", first_use.size());
  std::vector<size_t> by_use(bytes.size());
  std::iota(by_use.begin(), by_use.end(), size_t(0));
  std::stable_sort(by_use.begin(), by_use.end(),
                   [&](size_t a, size_t b) { return first_use[a] < first_use[b]; });
  std::vector<bool> on_device(bytes.size(), false);
  int64_t used = 0;
  for (size_t c : by_use) {
    if (used + bytes[c] > budget) continue;
    used += bytes[c];
    on_device[c] = true;
  }
  return on_device;
}

ChunkSchedule::ChunkSchedule(std::vector<std::vector<size_t>> reads, std::vector<int64_t> bytes,
                             size_t length)
    : reads_(std::move(reads)), bytes_(std::move(bytes)), length_(length) {
  TS_CHECK(reads_.size() == bytes_.size(), "zero", "expected the reads of every chunk (",
           bytes_.size(), "), got ", reads_.size());
  for (const std::vector<size_t>& r : reads_)
    TS_CHECK(std::is_sorted(r.begin(), r.end()) && (r.empty() || r.back() < length_), "zero",
             "expected ascending read positions below the record's length ", length_);
}

size_t ChunkSchedule::until_read(size_t c, size_t at) const {
  const std::vector<size_t>& r = reads_[c];
  if (r.empty()) return SIZE_MAX;
  auto it = std::upper_bound(r.begin(), r.end(), at);
  return it != r.end() ? *it - at : r.front() + length_ - at;
}

int64_t ChunkSchedule::device_bytes(const std::vector<bool>& on_device) const {
  int64_t total = 0;
  for (size_t c = 0; c < bytes_.size(); ++c) total += on_device[c] ? bytes_[c] : 0;
  return total;
}

void ChunkSchedule::fit(size_t at, int64_t budget, std::vector<bool>& on_device) const {
  int64_t held = device_bytes(on_device);
  while (held > budget) {
    size_t latest = SIZE_MAX, farthest = 0;
    for (size_t c = 0; c < bytes_.size(); ++c) {
      if (!on_device[c]) continue;
      const size_t d = until_read(c, at);
      if (latest == SIZE_MAX || d > farthest) latest = c, farthest = d;
    }
    on_device[latest] = false;
    held -= bytes_[latest];
  }
}

void ChunkSchedule::step(size_t at, const std::vector<size_t>& need, int64_t budget,
                         std::vector<bool>& on_device) const {
  fit(at, budget, on_device);
  for (size_t c : need) {
    if (on_device[c]) continue;
    // Room for c by evicting only copies read after it: worth it, since c is read sooner.
    const size_t mine = until_read(c, at);
    int64_t room = budget - device_bytes(on_device);
    std::vector<std::pair<size_t, size_t>> later;  // (until read, chunk), read after c
    for (size_t d = 0; d < bytes_.size(); ++d)
      if (on_device[d] && until_read(d, at) > mine) later.emplace_back(until_read(d, at), d);
    std::sort(later.rbegin(), later.rend());  // read latest first
    size_t evicted = 0;
    while (room < bytes_[c] && evicted < later.size()) room += bytes_[later[evicted++].second];
    if (room < bytes_[c]) continue;  // stays home: the gather reads it from the host
    for (size_t k = 0; k < evicted; ++k) on_device[later[k].second] = false;
    on_device[c] = true;
  }
}

const char* placement_policy_name(PlacementPolicy policy) {
  switch (policy) {
    case PlacementPolicy::device:
      return "device";
    case PlacementPolicy::static_share:
      return "static";
    case PlacementPolicy::auto_traced:
      return "auto";
  }
  return "?";
}

PlacementPolicy parse_placement_policy(const std::string& name, const std::string& key) {
  for (PlacementPolicy p :
       {PlacementPolicy::device, PlacementPolicy::static_share, PlacementPolicy::auto_traced})
    if (name == placement_policy_name(p)) return p;
  TS_FAIL("config", key, ": expected a parameter placement of device, static or auto, got '", name,
          "'");
}

int64_t parse_bytes(const std::string& text, const std::string& key) {
  size_t digits = 0;
  while (digits < text.size() && (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.'))
    ++digits;
  const std::string unit = text.substr(digits);
  double scale = 0;
  if (unit.empty() || unit == "B") scale = 1;
  else if (unit == "K" || unit == "KB" || unit == "KiB") scale = 1024.0;
  else if (unit == "M" || unit == "MB" || unit == "MiB") scale = 1024.0 * 1024;
  else if (unit == "G" || unit == "GB" || unit == "GiB") scale = 1024.0 * 1024 * 1024;
  double value = 0;
  bool parsed = digits > 0 && scale > 0;
  if (parsed) {
    try {
      size_t used = 0;
      value = std::stod(text.substr(0, digits), &used);
      parsed = used == digits;  // "1.2.3M" stops early
    } catch (const std::exception&) {
      parsed = false;
    }
  }
  TS_CHECK(parsed && value * scale >= 1.0, "config", key, ": expected a size such as \"8G\", ",
           "\"512M\", \"64K\" or a number of bytes, got \"", text, "\"");
  return int64_t(value * scale);
}

}  // namespace tessera::parallel::zero

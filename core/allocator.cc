#include "core/allocator.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <list>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "core/error.h"

namespace tessera {
namespace {

constexpr int kMaxDevices = 16;

struct Counters {
  std::mutex mu;
  MemoryStats stats[2][kMaxDevices];
};

Counters& counters() {
  static Counters c;
  return c;
}

MemoryStats& slot(Device d) {
  TS_CHECK(d.index >= 0 && d.index < kMaxDevices, "memory", "device index out of range: ", d.index);
  return counters().stats[int(d.type)][d.index];
}

// Large CPU blocks are kept for reuse. glibc maps every block above its mmap threshold anew and
// unmaps it when freed, so each training step's activations would fault in fresh zeroed pages.
// Blocks of 1 MiB and more, rounded to 64 KiB, go to a cache on release and serve the next request
// of the same rounded size (a step allocates the same shapes every time). Admitting a block evicts
// the ones freed longest ago while the cache would exceed its cap. The cap follows the most bytes
// of large blocks tensors have held at once (at least 1 GiB, at most a quarter of the physical
// memory): a step frees about its peak and allocates it again, so the whole step reuses its
// blocks, and the process holds little more than its peak (the freed blocks are the ones the
// next step takes). A fixed cap of 1 GiB missed most of a GPT-2 124M step at 4 x 256 (2.4 GB):
// the logits and their gradient faulted in anew every step, a quarter of the step's time on a
// VM here. TESSERA_CPU_CACHE_MB fixes the cap instead (0 turns the cache off). The memory counters
// count tensors, never the cache. An allocation that fails empties the cache and retries. Under
// AddressSanitizer nothing is cached, so every use after free is still caught.
class CpuAllocator final : public Allocator {
 public:
  CpuAllocator() {
#if defined(__SANITIZE_ADDRESS__)
    fixed_cap_ = true;
    cap_ = 0;
#else
    if (const char* mb = std::getenv("TESSERA_CPU_CACHE_MB")) {
      fixed_cap_ = true;
      cap_ = size_t(std::strtoull(mb, nullptr, 10)) << 20;
    } else {
      const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
      max_cap_ = pages > 0 && page > 0 ? size_t(pages) * size_t(page) / 4 : kMinCap;
      cap_ = std::min(kMinCap, max_cap_);
    }
#endif
  }
  ~CpuAllocator() override { release_cache(); }

  void* allocate(size_t nbytes, Device device) override {
    const size_t rounded = rounded_size(nbytes);
    void* p = rounded >= kCacheFrom ? take_cached(rounded) : nullptr;
    if (!p) p = std::aligned_alloc(kCpuAlignment, rounded);
    if (!p && release_cache() > 0) p = std::aligned_alloc(kCpuAlignment, rounded);
    if (!p)
      throw InternalError("alloc", str_cat("out of CPU memory allocating ", nbytes, " bytes"));
    if (rounded >= kCacheFrom) note_held(rounded);
    record_alloc(device, int64_t(nbytes));
    return p;
  }
  void deallocate(void* ptr, size_t nbytes, Device device) noexcept override {
    record_free(device, int64_t(nbytes));
    const size_t rounded = rounded_size(nbytes);
    if (rounded < kCacheFrom) return std::free(ptr);
    std::lock_guard<std::mutex> lock(mu_);
    live_large_ -= rounded;
    if (rounded > cap_) return std::free(ptr);
    while (cached_bytes_ + rounded > cap_) {  // the oldest make room
      const Block old = lru_.front();
      lru_.pop_front();
      auto& same = by_size_[old.size];
      same.erase(std::find(same.begin(), same.end(), old.ptr));
      cached_bytes_ -= old.size;
      std::free(old.ptr);
    }
    lru_.push_back({rounded, ptr});
    by_size_[rounded].push_back(ptr);
    cached_bytes_ += rounded;
  }

  CpuCacheStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return {int64_t(cached_bytes_), int64_t(cap_)};
  }

 private:
  static constexpr size_t kCacheFrom = size_t(1) << 20;
  static constexpr size_t kCacheRound = size_t(64) << 10;
  static constexpr size_t kMinCap = size_t(1) << 30;
  struct Block {
    size_t size;
    void* ptr;
  };

  static size_t rounded_size(size_t nbytes) {
    const size_t unit = nbytes >= kCacheFrom ? kCacheRound : kCpuAlignment;
    return (std::max<size_t>(nbytes, 1) + unit - 1) / unit * unit;
  }
  void* take_cached(size_t rounded) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_size_.find(rounded);
    if (it == by_size_.end() || it->second.empty()) return nullptr;
    void* p = it->second.back();  // the newest of that size: its pages are the warmest
    it->second.pop_back();
    lru_.erase(std::find_if(lru_.begin(), lru_.end(), [p](const Block& b) { return b.ptr == p; }));
    cached_bytes_ -= rounded;
    return p;
  }
  // A large block now held by a tensor: the cap follows the most such bytes held at once.
  void note_held(size_t rounded) {
    std::lock_guard<std::mutex> lock(mu_);
    live_large_ += rounded;
    if (!fixed_cap_) cap_ = std::max(cap_, std::min(live_large_, max_cap_));
  }
  size_t release_cache() {
    std::lock_guard<std::mutex> lock(mu_);
    const size_t released = cached_bytes_;
    for (const Block& b : lru_) std::free(b.ptr);
    lru_.clear();
    by_size_.clear();
    cached_bytes_ = 0;
    return released;
  }

  std::mutex mu_;
  std::list<Block> lru_;                                    // cached blocks, oldest first
  std::unordered_map<size_t, std::vector<void*>> by_size_;  // rounded size -> its cached blocks
  size_t cached_bytes_ = 0;
  size_t live_large_ = 0;  // bytes of large blocks held by tensors now
  size_t cap_ = 0;
  size_t max_cap_ = 0;
  bool fixed_cap_ = false;  // TESSERA_CPU_CACHE_MB, or AddressSanitizer
};

CpuAllocator& cpu_allocator() {
  static CpuAllocator cpu;
  return cpu;
}

Allocator* g_allocators[2] = {nullptr, nullptr};

}  // namespace

Allocator& allocator_for(Device device) {
  if (device.is_cpu()) return g_allocators[0] ? *g_allocators[0] : cpu_allocator();
  TS_CHECK(g_allocators[1] != nullptr, "alloc",
           "CUDA is not available in this build or on this machine (asked for ", device.str(), ")");
  return *g_allocators[1];
}

void register_allocator(DeviceType type, Allocator* allocator) {
  g_allocators[int(type)] = allocator;
}

CpuCacheStats cpu_cache_stats() { return cpu_allocator().stats(); }

MemoryStats memory_stats(Device device) {
  std::lock_guard<std::mutex> lock(counters().mu);
  return slot(device);
}

void reset_peak_memory(Device device) {
  std::lock_guard<std::mutex> lock(counters().mu);
  MemoryStats& s = slot(device);
  s.peak_bytes = s.current_bytes;
}

void reset_trace_peak(Device device) {
  std::lock_guard<std::mutex> lock(counters().mu);
  MemoryStats& s = slot(device);
  s.trace_peak_bytes = s.current_bytes;
}

void record_alloc(Device device, int64_t nbytes) {
  std::lock_guard<std::mutex> lock(counters().mu);
  MemoryStats& s = slot(device);
  s.current_bytes += nbytes;
  s.num_allocs += 1;
  if (s.current_bytes > s.peak_bytes) s.peak_bytes = s.current_bytes;
  if (s.current_bytes > s.trace_peak_bytes) s.trace_peak_bytes = s.current_bytes;
}

void record_free(Device device, int64_t nbytes) {
  std::lock_guard<std::mutex> lock(counters().mu);
  slot(device).current_bytes -= nbytes;
}

}  // namespace tessera

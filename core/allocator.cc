#include "core/allocator.h"

#include <cstdlib>
#include <mutex>
#include <new>

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

class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, Device device) override {
    size_t rounded = (std::max<size_t>(nbytes, 1) + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
    void* p = std::aligned_alloc(kCpuAlignment, rounded);
    if (!p) throw InternalError("alloc", str_cat("out of CPU memory allocating ", nbytes, " bytes"));
    record_alloc(device, int64_t(nbytes));
    return p;
  }
  void deallocate(void* ptr, size_t nbytes, Device device) noexcept override {
    std::free(ptr);
    record_free(device, int64_t(nbytes));
  }
};

Allocator* g_allocators[2] = {nullptr, nullptr};

}  // namespace

Allocator& allocator_for(Device device) {
  static CpuAllocator cpu;
  if (device.is_cpu()) return g_allocators[0] ? *g_allocators[0] : cpu;
  TS_CHECK(g_allocators[1] != nullptr, "alloc",
           "CUDA is not available in this build or on this machine (asked for ", device.str(), ")");
  return *g_allocators[1];
}

void register_allocator(DeviceType type, Allocator* allocator) { g_allocators[int(type)] = allocator; }

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

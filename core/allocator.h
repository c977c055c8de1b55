// Memory allocators, one per device type, each counting current and peak bytes per device.
// CPU memory is 64-byte aligned so vector loads never straddle a cache line at a tensor's start.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/device.h"

namespace tessera {

struct MemoryStats {
  int64_t current_bytes = 0;
  int64_t peak_bytes = 0;
  int64_t num_allocs = 0;  // allocations made so far
  // The peak since reset_trace_peak: a memory tracer's own intervals (ZeRO stage 3's warm-up
  // samples one per parameter gather), which leave peak_bytes to whoever reports it.
  int64_t trace_peak_bytes = 0;
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t nbytes, Device device) = 0;
  virtual void deallocate(void* ptr, size_t nbytes, Device device) noexcept = 0;
};

// The allocator serving a device type; CUDA's is registered by the CUDA backend when present.
Allocator& allocator_for(Device device);
void register_allocator(DeviceType type, Allocator* allocator);

// The built-in CPU allocator's cache of freed blocks of 1 MiB and more (allocator.cc): the bytes
// it holds and the most it may hold now (the cap follows the tensors' peak of such blocks).
struct CpuCacheStats {
  int64_t cached_bytes = 0;
  int64_t cap_bytes = 0;
};
CpuCacheStats cpu_cache_stats();

// Byte accounting, shared by every allocator.
MemoryStats memory_stats(Device device);
void reset_peak_memory(Device device);
void reset_trace_peak(Device device);
void record_alloc(Device device, int64_t nbytes);
void record_free(Device device, int64_t nbytes);

inline constexpr size_t kCpuAlignment = 64;

}  // namespace tessera

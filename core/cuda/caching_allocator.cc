// The CUDA side of the caching allocator: a SegmentBackend over the runtime API per device, the
// per-device pools, and the Allocator that Storage uses for cuda tensors.
#include "core/cuda/caching_allocator.h"

#include <array>
#include <memory>
#include <mutex>

#include "core/cuda/device_guard.h"
#include "core/cuda/runtime.h"
#include "core/error.h"

namespace tessera::cuda {
namespace {

constexpr int kMaxDevices = 16;  // as core/allocator.cc counts

class CudaSegmentBackend final : public SegmentBackend {
 public:
  explicit CudaSegmentBackend(int device) : device_(device) {}

  void* malloc_segment(size_t nbytes) override {
    DeviceGuard guard(device_);
    void* ptr = nullptr;
    const cudaError_t err = cudaMalloc(&ptr, nbytes);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // not sticky, but clear it so the next check does not see it
      return nullptr;
    }
    TS_CUDA_CHECK(err);
    return ptr;
  }
  void free_segment(void* ptr, size_t) override {
    DeviceGuard guard(device_);
    TS_CUDA_CHECK(cudaFree(ptr));
  }
  EventId record_event(StreamId stream) override {
    DeviceGuard guard(device_);
    cudaEvent_t event = nullptr;
    TS_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    TS_CUDA_CHECK(cudaEventRecord(event, reinterpret_cast<cudaStream_t>(stream)));
    return event;
  }
  bool event_done(EventId event) override {
    const cudaError_t err = cudaEventQuery(static_cast<cudaEvent_t>(event));
    if (err == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    TS_CUDA_CHECK(err);
    return true;
  }
  void synchronize_event(EventId event) override {
    TS_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event)));
  }
  void destroy_event(EventId event) override {
    (void)cudaEventDestroy(static_cast<cudaEvent_t>(event));
  }
  std::pair<size_t, size_t> mem_info() override {
    DeviceGuard guard(device_);
    size_t free_bytes = 0, total_bytes = 0;
    TS_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    return {free_bytes, total_bytes};
  }

 private:
  int device_;
};

struct DevicePool {
  CudaSegmentBackend backend;
  BlockPool pool;
  explicit DevicePool(int device) : backend(device), pool(&backend, device) {}
};

// Pools are created on a device's first allocation; never destroyed, because tensors in static
// storage may free their memory after other statics are gone.
struct Pools {
  std::mutex mu;
  std::array<DevicePool*, kMaxDevices> pools{};
};

Pools& pools() {
  static Pools* p = new Pools;
  return *p;
}

DevicePool* find_pool(int device) {
  if (device < 0 || device >= kMaxDevices) return nullptr;
  std::lock_guard<std::mutex> lock(pools().mu);
  return pools().pools[device];
}

BlockPool& pool_for(Device device) {
  TS_CHECK(is_available(), "cuda alloc", "cannot allocate on ", device.str(), ": ",
           unavailable_reason());
  TS_CHECK(device.index >= 0 && device.index < device_count() && device.index < kMaxDevices,
           "cuda alloc", "expected a device index in [0, ", device_count(), "), got ",
           device.str());
  std::lock_guard<std::mutex> lock(pools().mu);
  DevicePool*& p = pools().pools[device.index];
  if (!p) p = new DevicePool(device.index);
  return p->pool;
}

class CudaCachingAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, Device device) override {
    BlockPool& pool = pool_for(device);
    void* ptr = pool.allocate(nbytes, reinterpret_cast<StreamId>(current_stream(device.index)));
    record_alloc(device, int64_t(nbytes));
    return ptr;
  }
  void deallocate(void* ptr, size_t nbytes, Device device) noexcept override {
    if (DevicePool* p = find_pool(device.index)) {
      try {
        p->pool.free(ptr);
      } catch (...) {
        // A failed event record (the driver shutting down at exit): the block stays unusable.
      }
    }
    record_free(device, int64_t(nbytes));
  }
};

}  // namespace

Allocator& caching_allocator() {
  static CudaCachingAllocator* a = new CudaCachingAllocator;
  return *a;
}

BlockPoolStats allocator_stats(int device) {
  DevicePool* p = find_pool(device);
  return p ? p->pool.stats() : BlockPoolStats{};
}

void reset_peak_allocator_stats(int device) {
  if (DevicePool* p = find_pool(device)) p->pool.reset_peak_stats();
}

void empty_cache() {
  for (int d = 0; d < kMaxDevices; ++d)
    if (DevicePool* p = find_pool(d)) p->pool.empty_cache();
}

void record_stream(const Tensor& t, cudaStream_t stream) {
  TS_CHECK(t.device().is_cuda(), "record_stream", "expected a cuda tensor, got ", t.describe());
  void* base = t.storage()->data();
  if (base == nullptr) return;  // an empty tensor owns no memory
  DevicePool* p = find_pool(t.device().index);
  TS_CHECK(p != nullptr, "record_stream", "expected memory of the caching allocator, got ",
           t.describe());
  p->pool.record_stream(base, reinterpret_cast<StreamId>(stream));
}

}  // namespace tessera::cuda

// Pinned host tensors: storage from cudaHostAlloc, released with cudaFreeHost, and a registry of
// live pinned buffers so is_pinned() needs no driver call.
#include "core/cuda/pinned.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <unordered_set>

#include "core/allocator.h"
#include "core/copy.h"
#include "core/cuda/runtime.h"

namespace tessera::cuda {
namespace {

struct Registry {
  std::mutex mu;
  std::unordered_set<void*> live;
};

Registry& registry() {
  static Registry* r = new Registry;  // outlives static tensors that free pinned memory at exit
  return *r;
}

}  // namespace

Tensor pinned_empty(const Shape& shape, DType dtype) {
  for (int64_t s : shape)
    TS_CHECK(s >= 0, "pinned_empty", "expected non-negative sizes, got ", shape_str(shape));
  TS_CHECK(is_available(), "pinned_empty",
           "pinned host memory needs a CUDA device: ", unavailable_reason());
  const size_t nbytes = size_t(shape_numel(shape)) * dtype_size(dtype);
  void* ptr = nullptr;
  // At least one byte, so every pinned storage has a distinct address in the registry.
  TS_CUDA_CHECK(cudaHostAlloc(&ptr, std::max<size_t>(nbytes, 1), cudaHostAllocPortable));
  {
    std::lock_guard<std::mutex> lock(registry().mu);
    registry().live.insert(ptr);
  }
  record_alloc(kCPU, int64_t(nbytes));
  auto release = [nbytes](void* p) {
    {
      std::lock_guard<std::mutex> lock(registry().mu);
      registry().live.erase(p);
    }
    (void)cudaFreeHost(p);  // never throws: runs in a destructor
    record_free(kCPU, int64_t(nbytes));
  };
  auto storage = std::make_shared<Storage>(ptr, nbytes, kCPU, release);
  return Tensor(std::move(storage), shape, contiguous_strides(shape), 0, dtype);
}

Tensor pin_memory(const Tensor& t) {
  Tensor out = pinned_empty(t.shape(), t.dtype());
  copy_tensor(t, out);
  return out;
}

bool is_pinned(const Tensor& t) {
  if (!t.defined() || !t.device().is_cpu()) return false;
  std::lock_guard<std::mutex> lock(registry().mu);
  return registry().live.count(t.storage()->data()) > 0;
}

}  // namespace tessera::cuda

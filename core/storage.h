// A block of memory on one device, shared by a tensor and all its views. It also holds the version
// counter that autograd uses to detect in-place changes to saved tensors (views share it).
//
// A storage with a materializer may be released: its bytes go back to the allocator (so the
// memory counters drop) and the next data() call refills it through the materializer before
// returning. ZeRO stage 3 keeps parameters this way (parallel/zero/stage3_params.h): data() is the
// one door to a tensor's bytes (Tensor::data_ptr goes through it, and views share the Storage),
// so a kernel, or a view saved for backward, finds its parameter gathered whenever it looks. The
// version counter is untouched by release and refill: the values are the same ones.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>

#include "core/device.h"

namespace tessera {

class Storage {
 public:
  // Called by data() on a released storage; must leave it holding its bytes (allocate() then fill
  // them, or adopt() a filled donor). It runs on the thread that called data().
  using Materializer = std::function<void(Storage&)>;

  // Allocates nbytes on `device` through its allocator.
  Storage(size_t nbytes, Device device);
  // Wraps memory owned elsewhere (a memory-mapped file, say); `release` runs when the last user
  // goes.
  Storage(void* data, size_t nbytes, Device device, std::function<void(void*)> release);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  // One branch on the fast path; a released storage is refilled first.
  void* data() const {
    void* p = data_.load(std::memory_order_acquire);
    if (p == nullptr) [[unlikely]]
      p = materialize();
    return p;
  }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

  // Installs (or, empty, removes) the materializer. Only allocator-owned storages take one.
  void set_materializer(Materializer materializer);
  bool has_materializer() const { return static_cast<bool>(materializer_); }
  // Holds no bytes now (after release(), until the next data()).
  bool released() const { return data_.load(std::memory_order_acquire) == nullptr; }
  // Returns the bytes to the allocator; needs a materializer. No-op when already released.
  void release();
  // For materializers: fresh bytes for a released storage (contents unspecified).
  void allocate();
  // For materializers: takes `donor`'s bytes (an allocator-owned storage of the same size and
  // device, e.g. a gather buffer filled in advance) into this released storage; the donor is left
  // released.
  void adopt(Storage& donor);

 private:
  void* materialize() const;

  mutable std::atomic<void*> data_;
  size_t nbytes_;
  Device device_;
  std::function<void(void*)> release_;  // empty: memory came from the device's allocator
  Materializer materializer_;
  std::atomic<uint64_t> version_{0};
};

}  // namespace tessera

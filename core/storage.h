// A block of memory on one device, shared by a tensor and all its views. It also holds the version
// counter that autograd uses to detect in-place changes to saved tensors (views share it).
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>

#include "core/device.h"

namespace tessera {

class Storage {
 public:
  // Allocates nbytes on `device` through its allocator.
  Storage(size_t nbytes, Device device);
  // Wraps memory owned elsewhere (a memory-mapped file, say); `release` runs when the last user goes.
  Storage(void* data, size_t nbytes, Device device, std::function<void(void*)> release);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  void* data_;
  size_t nbytes_;
  Device device_;
  std::function<void(void*)> release_;  // empty: memory came from the device's allocator
  std::atomic<uint64_t> version_{0};
};

}  // namespace tessera

#include "core/storage.h"

#include <mutex>

#include "core/allocator.h"
#include "core/error.h"

namespace tessera {

namespace {
// Refills are rare and may be collective: one at a time. Recursive, since a materializer may touch
// another released storage.
std::recursive_mutex& refill_mutex() {
  static std::recursive_mutex m;
  return m;
}
}  // namespace

Storage::Storage(size_t nbytes, Device device)
    : data_(allocator_for(device).allocate(nbytes, device)), nbytes_(nbytes), device_(device) {}

Storage::Storage(void* data, size_t nbytes, Device device, std::function<void(void*)> release)
    : data_(data), nbytes_(nbytes), device_(device), release_(std::move(release)) {}

Storage::~Storage() {
  void* p = data_.load(std::memory_order_acquire);
  if (release_) {
    release_(p);
  } else if (p != nullptr) {
    allocator_for(device_).deallocate(p, nbytes_, device_);
  }
}

void Storage::set_materializer(Materializer materializer) {
  TS_CHECK(!release_ || !materializer, "storage",
           "expected an allocator-owned storage for a materializer, got wrapped memory");
  materializer_ = std::move(materializer);
}

void Storage::release() {
  TS_CHECK(materializer_, "storage", "release() needs a materializer to refill the storage");
  void* p = data_.exchange(nullptr, std::memory_order_acq_rel);
  if (p != nullptr) allocator_for(device_).deallocate(p, nbytes_, device_);
}

void Storage::allocate() {
  TS_ASSERT(!release_ && released());
  data_.store(allocator_for(device_).allocate(nbytes_, device_), std::memory_order_release);
}

void Storage::adopt(Storage& donor) {
  TS_CHECK(released() && !release_ && !donor.release_ && donor.nbytes_ == nbytes_ &&
               donor.device_ == device_,
           "storage", "adopt: expected a released storage and an allocator-owned donor of ",
           nbytes_, " bytes on ", device_.str(), ", got a donor of ", donor.nbytes_, " bytes on ",
           donor.device_.str());
  data_.store(donor.data_.exchange(nullptr, std::memory_order_acq_rel), std::memory_order_release);
  TS_ASSERT(!released());
}

void* Storage::materialize() const {
  // No materializer: memory that is legitimately null (an empty allocation on some devices).
  if (!materializer_) return nullptr;
  std::lock_guard<std::recursive_mutex> lock(refill_mutex());
  if (void* p = data_.load(std::memory_order_acquire)) return p;  // another thread refilled it
  materializer_(const_cast<Storage&>(*this));
  void* p = data_.load(std::memory_order_acquire);
  TS_CHECK(p != nullptr, "storage", "the materializer left the storage without data");
  return p;
}

}  // namespace tessera

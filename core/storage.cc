#include "core/storage.h"

#include "core/allocator.h"

namespace tessera {

Storage::Storage(size_t nbytes, Device device)
    : data_(allocator_for(device).allocate(nbytes, device)), nbytes_(nbytes), device_(device) {}

Storage::Storage(void* data, size_t nbytes, Device device, std::function<void(void*)> release)
    : data_(data), nbytes_(nbytes), device_(device), release_(std::move(release)) {}

Storage::~Storage() {
  if (release_) {
    release_(data_);
  } else {
    allocator_for(device_).deallocate(data_, nbytes_, device_);
  }
}

}  // namespace tessera

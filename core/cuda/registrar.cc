// Registers the caching allocator and the CUDA copies with core at program load (//core/cuda is
// alwayslink). Registering only stores pointers: the driver is first asked on first use.
#include "core/allocator.h"
#include "core/copy.h"
#include "core/cuda/caching_allocator.h"
#include "core/cuda/copy.h"

namespace tessera::cuda {
namespace {

struct Registrar {
  Registrar() {
    register_allocator(DeviceType::cuda, &caching_allocator());
    register_device_copy(DeviceType::cuda, &device_copy, &device_fill);
  }
};

const Registrar g_registrar;

}  // namespace
}  // namespace tessera::cuda

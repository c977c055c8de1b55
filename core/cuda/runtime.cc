// Device discovery, per-thread current device and streams, and CUDA error reporting.
#include "core/cuda/runtime.h"

#include <mutex>
#include <unordered_map>

#include "core/error.h"

namespace tessera::cuda {
namespace {

struct Discovery {
  int count = 0;
  std::string reason;
};

// Asked once: cudaGetDeviceCount fails without a driver or a GPU, which means "no device".
const Discovery& discovery() {
  static const Discovery d = [] {
    Discovery out;
    int n = 0;
    const cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();  // clear the sticky error so later calls are not poisoned
      out.reason = str_cat("no usable CUDA device (cudaGetDeviceCount: ", cudaGetErrorString(err), ")");
    } else if (n == 0) {
      out.reason = "no CUDA device is present";
    }
    out.count = err == cudaSuccess ? n : 0;
    return out;
  }();
  return d;
}

thread_local int t_device = 0;
thread_local std::unordered_map<int, cudaStream_t> t_streams;

}  // namespace

bool is_available() { return discovery().count > 0; }
int device_count() { return discovery().count; }
std::string unavailable_reason() { return discovery().reason; }

int current_device() { return t_device; }

void set_device(int index) {
  TS_CHECK(index >= 0 && index < device_count(), "cuda", "expected a device index in [0, ",
           device_count(), "), got ", index, is_available() ? "" : " (" + unavailable_reason() + ")");
  TS_CUDA_CHECK(cudaSetDevice(index));
  t_device = index;
}

cudaStream_t current_stream(int device) {
  auto it = t_streams.find(device);
  return it == t_streams.end() ? cudaStream_t{nullptr} : it->second;
}

void set_current_stream(int device, cudaStream_t stream) { t_streams[device] = stream; }

void check(cudaError_t err, const char* expr, const char* file, int line) {
  if (err == cudaSuccess) [[likely]]
    return;
  throw InternalError("cuda", str_cat(expr, " failed: ", cudaGetErrorName(err), " (",
                                      cudaGetErrorString(err), ") at ", file, ":", line));
}

}  // namespace tessera::cuda

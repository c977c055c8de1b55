// CUDA device runtime: discovery, the current device and stream, error checking. With no GPU (or
// no driver) is_available() is false and says why; nothing here throws during discovery.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

namespace tessera::cuda {

bool is_available();
int device_count();              // 0 when no device is usable
std::string unavailable_reason();  // why is_available() is false ("" when true)

// The device the calling thread works on; set_device also makes it current for the CUDA runtime.
int current_device();
void set_device(int index);

// The stream new work on `device` is queued on, per thread (default: the legacy default stream).
// Every kernel and copy of this backend launches on current_stream(its tensor's device).
cudaStream_t current_stream(int device);
void set_current_stream(int device, cudaStream_t stream);

// Throws tessera::Error naming the failed call and CUDA's message.
void check(cudaError_t err, const char* expr, const char* file, int line);

}  // namespace tessera::cuda

#define TS_CUDA_CHECK(expr) ::tessera::cuda::check((expr), #expr, __FILE__, __LINE__)

// RAII CUDA streams and events, and StreamGuard, which makes a stream current for a scope. All of
// Tessera's CUDA work is queued on current_stream(device), so a guard redirects it.
#pragma once

#include <cuda_runtime_api.h>

#include "core/cuda/runtime.h"

namespace tessera::cuda {

// A non-blocking stream (no implicit ordering with the legacy default stream) on one device.
class Stream {
 public:
  explicit Stream(int device = current_device());
  ~Stream();
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  cudaStream_t get() const { return stream_; }
  int device() const { return device_; }
  void synchronize() const;  // blocks until every queued operation is done
  bool query() const;        // true when every queued operation is done

 private:
  cudaStream_t stream_ = nullptr;
  int device_ = 0;
};

// An event; created on the device of its first record(). timing=true enables elapsed_ms.
class Event {
 public:
  explicit Event(bool timing = false) : timing_(timing) {}
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  // Captures the work queued on `stream` (of `device`) so far.
  void record(cudaStream_t stream, int device);
  void record(const Stream& stream) { record(stream.get(), stream.device()); }
  // Work queued on `stream` after this call starts only once the recorded work is done.
  void wait(cudaStream_t stream) const;
  void wait(const Stream& stream) const { wait(stream.get()); }
  void synchronize() const;
  bool query() const;  // true when the recorded work is done (or nothing was recorded)
  // Milliseconds from this event to `end` (both recorded with timing=true, both done).
  float elapsed_ms(const Event& end) const;
  bool recorded() const { return event_ != nullptr; }

 private:
  void check_recorded(const char* op) const;
  cudaEvent_t event_ = nullptr;
  int device_ = -1;
  bool timing_ = false;
};

// Sets current_stream(device) for the calling thread within a scope; restores the previous one.
class StreamGuard {
 public:
  StreamGuard(int device, cudaStream_t stream);
  explicit StreamGuard(const Stream& stream) : StreamGuard(stream.device(), stream.get()) {}
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  int device_;
  cudaStream_t previous_;
};

}  // namespace tessera::cuda

// Streams, events and the stream guard over the CUDA runtime API.
#include "core/cuda/stream.h"

#include <utility>

#include "core/cuda/device_guard.h"
#include "core/error.h"

namespace tessera::cuda {

Stream::Stream(int device) : device_(device) {
  TS_CHECK(is_available(), "cuda stream", "cannot create a stream on cuda:", device, ": ",
           unavailable_reason());
  TS_CHECK(device >= 0 && device < device_count(), "cuda stream", "expected a device index in [0, ",
           device_count(), "), got ", device);
  DeviceGuard guard(device);
  TS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

Stream::~Stream() {
  if (stream_) (void)cudaStreamDestroy(stream_);  // queued work still completes
}

Stream::Stream(Stream&& other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)), device_(other.device_) {}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    if (stream_) (void)cudaStreamDestroy(stream_);
    stream_ = std::exchange(other.stream_, nullptr);
    device_ = other.device_;
  }
  return *this;
}

void Stream::synchronize() const { TS_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

bool Stream::query() const {
  const cudaError_t err = cudaStreamQuery(stream_);
  if (err == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  TS_CUDA_CHECK(err);
  return true;
}

Event::~Event() {
  if (event_) (void)cudaEventDestroy(event_);
}

Event::Event(Event&& other) noexcept
    : event_(std::exchange(other.event_, nullptr)),
      device_(other.device_),
      timing_(other.timing_) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (event_) (void)cudaEventDestroy(event_);
    event_ = std::exchange(other.event_, nullptr);
    device_ = other.device_;
    timing_ = other.timing_;
  }
  return *this;
}

void Event::record(cudaStream_t stream, int device) {
  DeviceGuard guard(device);
  if (event_ && device_ != device) {  // an event belongs to one device: start afresh on another
    (void)cudaEventDestroy(event_);
    event_ = nullptr;
  }
  if (!event_) {
    TS_CUDA_CHECK(
        cudaEventCreateWithFlags(&event_, timing_ ? cudaEventDefault : cudaEventDisableTiming));
    device_ = device;
  }
  TS_CUDA_CHECK(cudaEventRecord(event_, stream));
}

void Event::check_recorded(const char* op) const {
  TS_CHECK(event_ != nullptr, op, "expected an event that was recorded, got one never recorded");
}

void Event::wait(cudaStream_t stream) const {
  check_recorded("cuda event wait");
  TS_CUDA_CHECK(cudaStreamWaitEvent(stream, event_, 0));
}

void Event::synchronize() const {
  if (event_) TS_CUDA_CHECK(cudaEventSynchronize(event_));
}

bool Event::query() const {
  if (!event_) return true;
  const cudaError_t err = cudaEventQuery(event_);
  if (err == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  TS_CUDA_CHECK(err);
  return true;
}

float Event::elapsed_ms(const Event& end) const {
  check_recorded("cuda event elapsed");
  end.check_recorded("cuda event elapsed");
  TS_CHECK(timing_ && end.timing_, "cuda event elapsed",
           "expected two events created with timing=true");
  float ms = 0.0f;
  TS_CUDA_CHECK(cudaEventElapsedTime(&ms, event_, end.event_));
  return ms;
}

StreamGuard::StreamGuard(int device, cudaStream_t stream)
    : device_(device), previous_(current_stream(device)) {
  set_current_stream(device, stream);
}

StreamGuard::~StreamGuard() { set_current_stream(device_, previous_); }

}  // namespace tessera::cuda

// HostMover: pinned host buffers and asynchronous copies on a copy stream (see host_mover.h). The
// CUDA parts compile only with the CUDA backend (TESSERA_CUDA); without it every move is a plain
// copy, as on the CPU.
#include "parallel/zero/host_mover.h"

#include <cstdio>

#include "core/error.h"
#include "core/factory.h"
#include "parallel/zero/offload.h"

#ifdef TESSERA_CUDA
#include "core/cuda/caching_allocator.h"
#include "core/cuda/copy.h"
#include "core/cuda/pinned.h"
#include "core/cuda/runtime.h"
#include "core/cuda/stream.h"
#endif

namespace tessera::parallel::zero {

#ifdef TESSERA_CUDA
struct HostMover::CopyStream {
  cuda::Stream stream;
};
#else
struct HostMover::CopyStream {};
#endif

void MoveReady::wait() const {
#ifdef TESSERA_CUDA
  if (done_) done_->synchronize();
#endif
}

bool MoveReady::done() const {
#ifdef TESSERA_CUDA
  return !done_ || done_->query();
#else
  return true;
#endif
}

HostMover::HostMover(Device device) : device_(device), host_(offload_host_device(device)) {}

HostMover::~HostMover() {
  try {
    synchronize();
  } catch (const std::exception& e) {  // a destructor cannot throw: the device is failing anyway
    std::fprintf(stderr, "[zero] host moves still in flight failed: %s\n", e.what());
  }
}

Tensor HostMover::host_empty(int64_t numel, DType dtype) const {
#ifdef TESSERA_CUDA
  if (device_.is_cuda()) return cuda::pinned_empty({numel}, dtype);
#endif
  return empty({numel}, {.dtype = dtype, .device = host_});
}

Tensor HostMover::host_zeros(int64_t numel, DType dtype) const {
  Tensor t = host_empty(numel, dtype);
  t.zero_();
  return t;
}

Tensor HostMover::kept_host_zeros(size_t key, int64_t numel, DType dtype, bool rezero) {
  if (!device_.is_cuda()) return host_zeros(numel, dtype);
  if (kept_.size() <= key) kept_.resize(key + 1);
  Tensor& t = kept_[key];
  if (!t.defined() || t.numel() != numel || t.dtype() != dtype) {
    t = host_zeros(numel, dtype);
  } else if (rezero) {
    t.zero_();
  }
  return t;
}

Tensor HostMover::host_copy(const Tensor& t) const {
  Tensor out = host_empty(t.numel(), t.dtype());
  out.copy_(t.reshape({t.numel()}));
  return out.view(t.shape());
}

MoveReady HostMover::copy(const Tensor& src, const Tensor& dst) {
#ifdef TESSERA_CUDA
  const bool to_device = dst.device().is_cuda() && src.device().is_cpu();
  const bool to_host = src.device().is_cuda() && dst.device().is_cpu();
  const Tensor& host = to_device ? src : dst;
  const bool async = device_.is_cuda() && (to_device || to_host) && host.is_contiguous() &&
                     (to_device ? dst : src).is_contiguous() && cuda::is_pinned(host) &&
                     src.shape() == dst.shape() && src.dtype() == dst.dtype();
  if (async) {
    const int index = device_.index;
    if (!stream_) stream_ = std::make_unique<CopyStream>(CopyStream{cuda::Stream(index)});
    const cudaStream_t side = stream_->stream.get();
    const cudaStream_t compute = cuda::current_stream(index);
    // The copy reads what the compute stream has queued so far (a reduce's output, say).
    cuda::Event produced;
    produced.record(compute, index);
    produced.wait(side);
    cuda::copy_async(src, dst, side);
    cuda::record_stream(to_device ? dst : src, side);
    auto done = std::make_shared<cuda::Event>();
    done->record(stream_->stream);
    if (to_device) done->wait(compute);
    dst.bump_version();
    reap();
    in_flight_.push_back({done, host});
    ++stats_.async_copies;
    stats_.async_bytes += int64_t(dst.numel()) * int64_t(dst.itemsize());
    return MoveReady(std::move(done));
  }
#endif
  dst.copy_(src);
  ++stats_.sync_copies;
  return {};
}

void HostMover::synchronize() {
#ifdef TESSERA_CUDA
  if (stream_) stream_->stream.synchronize();
#endif
  in_flight_.clear();
}

void HostMover::reap() {
#ifdef TESSERA_CUDA
  while (!in_flight_.empty() && in_flight_.front().done->query()) in_flight_.pop_front();
#endif
}

}  // namespace tessera::parallel::zero

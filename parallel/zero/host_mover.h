// HostMover: ZeRO-Offload's moves between the compute device and the host.
//
// On a CUDA device the host buffers are pinned (cudaHostAlloc) and every move between them and the
// device is a cudaMemcpyAsync on a copy stream of the mover's own. A move starts after the work
// the compute stream (cuda::current_stream) has queued so far and then runs beside the kernels
// queued after it:
//   - to the device: the compute stream waits for the copy (an event, no host wait), so every
//     kernel or collective queued after copy() reads the moved values;
//   - to the host: the returned MoveReady says when the host may read the buffer; wait() blocks
//     the calling thread only (the CPU Adam's worker waits there, the trainer's thread goes on).
// The device side is marked used by the copy stream (cuda::record_stream), so freeing it at once
// is safe; the host side is kept alive until the copy is done.
//
// On the CPU, where the host is memory domain 1 of the same RAM (offload.h), a move is a plain
// copy, done at return. So are moves whose host side is not pinned or not contiguous on a GPU,
// which are correct but synchronous (stats() counts both kinds).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "core/tensor.h"

namespace tessera::cuda {
class Event;
}  // namespace tessera::cuda

namespace tessera::parallel::zero {

// When a move's destination may be read on the host; a plain copy's is ready at once. Copyable,
// and waitable from any thread.
class MoveReady {
 public:
  MoveReady() = default;
  explicit MoveReady(std::shared_ptr<const cuda::Event> done) : done_(std::move(done)) {}
  void wait() const;
  bool done() const;

 private:
  std::shared_ptr<const cuda::Event> done_;
};

struct HostMoverStats {
  int64_t async_copies = 0;  // queued on the copy stream
  int64_t sync_copies = 0;   // plain copies (CPU, or a host side that is not pinned)
  int64_t async_bytes = 0;
};

class HostMover {
 public:
  // device: the compute device; the host is offload_host_device(device).
  explicit HostMover(Device device);
  // Waits for the moves in flight.
  ~HostMover();
  HostMover(const HostMover&) = delete;
  HostMover& operator=(const HostMover&) = delete;

  Device device() const { return device_; }
  Device host() const { return host_; }

  // Host memory that moves asynchronously: pinned on a CUDA device, domain 1 on the CPU.
  Tensor host_empty(int64_t numel, DType dtype) const;
  Tensor host_zeros(int64_t numel, DType dtype) const;
  // A copy of t in such memory (a plain copy, done at return).
  Tensor host_copy(const Tensor& t) const;
  // Host buffers that moves fill step after step (the shard gradients), one per key: zeros when
  // first asked for. On a CUDA device the buffer is kept and handed out again, since pinning is
  // costly and stalls the device; `rezero` zeroes it again, otherwise it holds what the last step
  // wrote. On the CPU every call makes new zeros.
  Tensor kept_host_zeros(size_t key, int64_t numel, DType dtype, bool rezero);

  // dst = src (same shape and dtype), across the device and the host as described above, or a
  // plain copy when both are on one device. Called from the thread that trains.
  MoveReady copy(const Tensor& src, const Tensor& dst);
  // Blocks until every move in flight is done: the host then may write buffers a move reads.
  void synchronize();

  const HostMoverStats& stats() const { return stats_; }

 private:
  struct InFlight {
    std::shared_ptr<const cuda::Event> done;
    Tensor host;  // kept alive until the copy is done
  };
  void reap();        // forgets the moves already done
  struct CopyStream;  // a cuda::Stream; empty without the CUDA backend

  Device device_;
  Device host_;
  std::unique_ptr<CopyStream> stream_;  // made by the first asynchronous copy
  std::deque<InFlight> in_flight_;
  std::vector<Tensor> kept_;  // kept_host_zeros' buffers, by key
  HostMoverStats stats_;
};

}  // namespace tessera::parallel::zero

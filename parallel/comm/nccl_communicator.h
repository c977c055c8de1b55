// The NCCL backend: collectives on CUDA tensors, bootstrapped over a CPU communicator (MPI), run on
// the communicator's own CUDA stream so they overlap with compute. Work handles are CUDA events.
// Differences from the MPI backend: NCCL reduces 16-bit floats in their own precision; NCCL has
// no tags (sends and receives between a pair match in issue order; tags are only validated);
// split() (ncclCommSplit) blocks without a timeout.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <memory>
#include <string>

#include "parallel/comm/communicator.h"

namespace tessera::parallel {

class NcclCommunicator : public Communicator {
 public:
  // Collective over `bootstrap` (a CPU communicator): its rank 0 creates the NCCL unique id and
  // broadcasts it, then every rank joins with its tensors on CUDA device `device`.
  NcclCommunicator(Communicator& bootstrap, int device, const std::string& name = "");
  ~NcclCommunicator() override;

  // The number of CUDA devices; 0 when the runtime reports none or fails (no driver, no GPU).
  static int device_count();
  static bool is_available() { return device_count() > 0; }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend() const override { return "nccl"; }
  DeviceType device_type() const override { return DeviceType::cuda; }
  Device device() const override { return cuda_device(device_); }
  std::shared_ptr<Communicator> split(int color, int key, const std::string& name = "") override;

  ncclComm_t handle() const { return comm_; }
  cudaStream_t stream() const { return stream_; }

 protected:
  WorkPtr do_all_reduce(const Tensor& t, ReduceOp op) override;
  WorkPtr do_reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op) override;
  WorkPtr do_all_gather(const Tensor& in, const Tensor& out) override;
  WorkPtr do_broadcast(const Tensor& t, int root) override;
  WorkPtr do_reduce(const Tensor& t, int root, ReduceOp op) override;
  WorkPtr do_all_to_all(const Tensor& in, const Tensor& out) override;
  WorkPtr do_send(const Tensor& t, int peer, int tag) override;
  WorkPtr do_recv(const Tensor& t, int peer, int tag) override;
  WorkPtr do_batch_send_recv(const std::vector<P2POp>& ops) override;
  WorkPtr do_barrier() override;

 private:
  // Adopts a communicator made by ncclCommSplit.
  NcclCommunicator(ncclComm_t comm, int device, const std::string& name, double timeout_s);
  void init_stream();
  // Orders the stream after the work queued so far on the caller's current stream of this device,
  // runs `enqueue` (NCCL calls on stream_) and returns a Work that completes with them.
  template <typename Enqueue>
  WorkPtr launch(const char* op, std::vector<Tensor> keep_alive, Enqueue&& enqueue);

  ncclComm_t comm_ = nullptr;
  int device_ = 0;
  int rank_ = 0;
  int size_ = 1;
  cudaStream_t stream_ = nullptr;
  float* barrier_buf_ = nullptr;  // one device float that barrier() all-reduces
};

}  // namespace tessera::parallel

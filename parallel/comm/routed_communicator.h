// RoutedCommunicator: one group of ranks over two backends at once. Each call goes over the
// backend of its tensors' device: CPU tensors over the host communicator (MPI), CUDA tensors over
// the device communicator (NCCL) of the same ranks. Layers hold one communicator per group and
// never ask which backend moves what: the vocab-parallel loss all-reduces its CUDA logits' sums
// and its CPU target counts through the same tensor group. split() splits both backends, so every
// group a ParallelContext builds from a routed world is routed too.
//
// The byte counters and the profiler's events are this communicator's (the backends' own stay
// untouched); a barrier and a timeout are the host's; a batch of transfers must be on one device
// type. Without a device communicator it is the host communicator under another name.
#pragma once

#include <memory>
#include <string>

#include "parallel/comm/communicator.h"

namespace tessera::parallel {

class RoutedCommunicator : public Communicator {
 public:
  // `device` may be null; otherwise it has host's ranks in host's order and moves another device
  // type than host does.
  RoutedCommunicator(std::shared_ptr<Communicator> host, std::shared_ptr<Communicator> device,
                     const std::string& name = "");

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  // "mpi+nccl" (host "+" device), or the host's alone.
  const char* backend() const override { return backend_.c_str(); }
  // The compute device's: the device communicator's when there is one.
  DeviceType device_type() const override { return primary().device_type(); }
  Device device() const override { return primary().device(); }
  bool supports(DeviceType type) const override;
  std::shared_ptr<Communicator> split(int color, int key, const std::string& name = "") override;

  const std::shared_ptr<Communicator>& host() const { return host_; }
  const std::shared_ptr<Communicator>& device_comm() const { return device_; }

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
  const Communicator& primary() const { return device_ ? *device_ : *host_; }
  // The backend that moves tensors on t's device type (checked by the caller: supports()).
  Communicator& backend_for(const Tensor& t) const;

  std::shared_ptr<Communicator> host_;
  std::shared_ptr<Communicator> device_;
  std::string backend_;
};

}  // namespace tessera::parallel

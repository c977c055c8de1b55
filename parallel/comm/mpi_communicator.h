// The MPI backend: CPU tensors of every dtype over nonblocking MPI calls (MPI_Iallreduce, ...),
// waited for with MPI_Wait (see mpi_work.h).
// 16-bit floats (f16, bf16) are reduced in f32: each rank widens its tensor to f32, MPI reduces
// the f32 buffers, and the result is rounded back once (round to nearest even). This is exact
// for max and min and more accurate than rounding after every partial sum. mpi.h stays out of this
// header: the MPI_Comm is held through an opaque MpiComm (mpi_handle.h, internal).
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "parallel/comm/communicator.h"

namespace tessera::parallel {

struct MpiComm;    // the MPI_Comm, defined in mpi_handle.h
struct MpiCall;    // one operation, defined in mpi_call.h
class CallTensor;  // a borrowed or owned tensor of a call, defined in mpi_call.h

class MpiCommunicator : public Communicator {
 public:
  // A communicator over a duplicate of `comm` (so our traffic never matches anyone else's), with
  // errors returned to us (thrown as exceptions) instead of MPI's default of aborting.
  static std::shared_ptr<MpiCommunicator> duplicate(const MpiComm& comm, const std::string& name);
  // Takes ownership of `comm` (freed on destruction while MPI is running).
  MpiCommunicator(const MpiComm& comm, std::string name);
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend() const override { return "mpi"; }
  DeviceType device_type() const override { return DeviceType::cpu; }
  std::shared_ptr<Communicator> split(int color, int key, const std::string& name = "") override;
  // The MPI_Comm, for code that includes mpi_handle.h.
  const MpiComm& handle() const { return *comm_; }

 protected:
  WorkPtr do_all_reduce(const Tensor& t, ReduceOp op) override;
  WorkPtr do_reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op) override;
  WorkPtr do_all_gather(const Tensor& in, const Tensor& out) override;
  WorkPtr do_broadcast(const Tensor& t, int root) override;
  WorkPtr do_reduce(const Tensor& t, int root, ReduceOp op) override;
  WorkPtr do_all_to_all(const Tensor& in, const Tensor& out) override;
  WorkPtr do_send(const Tensor& t, int peer, int tag) override;
  WorkPtr do_recv(const Tensor& t, int peer, int tag) override;
  WorkPtr do_barrier() override;

 private:
  // The call of `kind` on this communicator with MPI's count and type of `in`: the caller's
  // tensors borrowed (start_work() owns them for a call that outlives the caller's frame),
  // staging buffers owned.
  MpiCall make_call(CommKind kind, CallTensor in, CallTensor out) const;
  // A reduction: 16-bit floats get f32 staging buffers and a result to round back into.
  MpiCall make_reduce_call(CommKind kind, const Tensor& in, const Tensor& out, ReduceOp op) const;
  // By rvalue reference: a small call runs blocking from the caller's frame, and moving the call
  // into a parameter (a copy through the stack) cost as much as the rest of the call's setup.
  WorkPtr start_work(MpiCall&& call, const char* op);

  std::unique_ptr<MpiComm> comm_;
  // A duplicate for the ring all_reduce's messages (mpi_ring.h), and the count of ring calls,
  // which gives each its tags (the same on every rank: ranks issue collectives in one order).
  // Shared with ring works in flight, which may outlive this communicator; freed by the last.
  std::shared_ptr<MpiComm> ring_comm_;
  std::atomic<uint32_t> ring_calls_{0};
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace tessera::parallel

// The MPI backend: CPU tensors of every dtype over nonblocking MPI calls (MPI_Iallreduce, ...).
// 16-bit floats (f16, bf16) are reduced in f32: each rank widens its tensor to f32, MPI reduces
// the f32 buffers, and the result is rounded back once (round to nearest even). This is exact
// for max and min and more accurate than rounding after every partial sum. mpi.h stays out of this
// header: the MPI_Comm is held through an opaque MpiComm (mpi_handle.h, internal).
#pragma once

#include <memory>
#include <string>

#include "parallel/comm/communicator.h"

namespace tessera::parallel {

struct MpiComm;  // the MPI_Comm, defined in mpi_handle.h

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
  std::unique_ptr<MpiComm> comm_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace tessera::parallel

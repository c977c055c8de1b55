// One operation of the MPI backend as plain data (no closures, one allocation per call with its
// Work): the buffers, MPI's count and type, and what to do after MPI is done. Internal (it
// includes mpi.h).
#pragma once

#include <mpi.h>

#include "core/tensor.h"
#include "parallel/comm/comm_types.h"

namespace tessera::parallel {

// A tensor an MpiCall reads or writes: borrowed from the caller while the call runs blocking
// inside the caller's frame, owned once the call may outlive it (a nonblocking call keeps its
// buffers alive until it completes). Borrowing touches no reference count: copying and dropping
// a handle are atomic instructions, and a small blocking collective's three handles cost about
// a third of everything Tessera adds to MPI's own time (all_gather 1 KB, 1 rank).
class CallTensor {
 public:
  CallTensor() = default;
  // `t` must outlive every use of this handle that precedes own().
  static CallTensor borrow(const Tensor& t) {
    CallTensor c;
    c.borrowed_ = &t;
    return c;
  }
  static CallTensor own(Tensor t) {
    CallTensor c;
    c.owned_ = std::move(t);
    return c;
  }
  // Holds the tensor itself from now on.
  void own() {
    if (borrowed_ == nullptr) return;
    owned_ = *borrowed_;
    borrowed_ = nullptr;
  }
  const Tensor& get() const { return borrowed_ != nullptr ? *borrowed_ : owned_; }
  operator const Tensor&() const { return get(); }
  const Tensor* operator->() const { return &get(); }

 private:
  const Tensor* borrowed_ = nullptr;
  Tensor owned_;
};

struct MpiCall {
  CommKind kind = CommKind::barrier;
  MPI_Comm comm = MPI_COMM_NULL;
  // MPI's send buffer; the in-place buffer of all_reduce, broadcast and reduce (there an f32
  // staging copy of a 16-bit float tensor). Undefined for barrier.
  CallTensor in;
  // MPI's receive buffer of reduce_scatter, all_gather and all_to_all (reduce_scatter's may be
  // an f32 staging buffer); undefined for in-place operations.
  CallTensor out;
  // The caller's tensor the reduced result goes to when it was reduced in a staging buffer;
  // undefined when MPI writes the caller's tensor directly.
  CallTensor result;
  ReduceOp op = ReduceOp::sum;
  int root = 0;  // broadcast, reduce
  int peer = 0;  // send, recv
  int tag = 0;   // send, recv
  int rank = 0;  // this rank in `comm`
  int group_size = 1;
  MPI_Datatype type = MPI_BYTE;  // of `in` (and `out`)
  int count = 0;                 // elements per rank as MPI counts them (see mpi_call.cc)

  // True when the result needs a step after MPI is done: avg divides, staging buffers round back.
  bool needs_finish() const;
  // Holds every tensor itself (before the call may outlive its caller's frame).
  void own_tensors() {
    in.own();
    out.own();
    result.own();
  }
};

// Starts `call` as a nonblocking MPI call; throws (TS_MPI_CHECK) when MPI refuses it.
MPI_Request start_call(const MpiCall& call);
// True when `call` runs as the blocking MPI call (MPI_Allreduce, ...) instead: a small collective,
// where Open MPI's blocking algorithms beat its nonblocking ones (libnbc) by up to 4x and overlap
// has nothing to hide. The rule reads only what every rank of the call agrees on (its kind, its
// size, the MPI thread level), so every rank picks the same form (see mpi_work.h). Point-to-point
// transfers always stay nonblocking (a blocking send before its peer's receive could deadlock),
// and so does reduce (mpi_call.cc says why).
// TESSERA_MPI_BLOCKING=0 in the environment turns this path off.
bool runs_blocking(const MpiCall& call);
// Runs `call` as the blocking MPI call; throws (TS_MPI_CHECK) when MPI refuses it.
void run_blocking_call(const MpiCall& call);
// After MPI is done: divides for avg, rounds a staging buffer back into the caller's tensor.
void finish_call(const MpiCall& call);

}  // namespace tessera::parallel

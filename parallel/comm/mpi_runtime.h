// MPI's lifetime in one object, and the job-level failure policy: an error on any rank ends every
// rank at once (MPI_Abort), with the rank named in the message, instead of leaving peers hanging.
// mpi.h stays out of this header (the communicators are opaque MpiComm handles, mpi_handle.h).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "parallel/comm/communicator.h"

namespace tessera::parallel {

class MpiCommunicator;
struct MpiComm;  // the MPI_Comm, defined in mpi_handle.h

// Initialises MPI (MPI_THREAD_MULTIPLE when the library provides it; otherwise every MPI call is
// serialised by a lock) and finalises it on destruction. One per process: MPI cannot be
// initialised twice. If something else already initialised MPI, this adopts it and leaves
// finalisation to its owner.
class MpiRuntime {
 public:
  MpiRuntime(int* argc = nullptr, char*** argv = nullptr);
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  // Every process of the job, named "world" (a duplicate of MPI_COMM_WORLD).
  const std::shared_ptr<MpiCommunicator>& world() const { return world_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  bool thread_multiple() const { return thread_multiple_; }

 private:
  bool owns_mpi_ = false;
  bool thread_multiple_ = false;
  int rank_ = 0;
  int size_ = 1;
  std::shared_ptr<MpiCommunicator> world_;
  // A private communicator for the shutdown barrier, so it can never match a user's collective.
  std::unique_ptr<MpiComm> shutdown_comm_;
};

// True between MPI_Init and MPI_Finalize.
bool mpi_active();
// The rank in MPI_COMM_WORLD, or -1 before MPI starts.
int world_rank();

// Prints "rank R: <message>" to stderr and ends the whole job with `code` (MPI_Abort when MPI is
// running, _Exit otherwise). Never returns.
[[noreturn]] void abort_job(const std::string& message, int code = 1);

// The guarded main of a distributed program: starts MPI, runs fn(world) and finalises. An
// exception escaping fn, or a non-zero return, aborts every rank with "rank R: <message>"; the
// return value is what main should return.
using DistributedMain = std::function<int(const std::shared_ptr<Communicator>& world)>;
int run_distributed(int argc, char** argv, const DistributedMain& fn);

}  // namespace tessera::parallel

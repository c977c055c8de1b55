// The Work handle of the MPI backend. Internal (it includes mpi.h): only the MPI sources of
// parallel/comm include it; users see the Work interface.
//
// Every operation starts at once as the nonblocking MPI call (MPI_Iallreduce, MPI_Isend, ...), or
// for an all_reduce (large, or on a power-of-two group) as our own schedule of nonblocking sends
// and receives (mpi_ring.h), except a small collective, which runs as the blocking MPI call and
// returns a finished Work (runs_blocking() in mpi_call.h). Every rank must pick the same form, as a
// blocking collective does not match a nonblocking one (MPI 3.1, 5.12; Open MPI deadlocks): so the
// choice reads only the call's kind and size, which the ranks share, never whether this rank's
// caller waits at once. Mixing the two forms on one communicator in the same order on every rank
// is allowed. wait() tests the request a few times (a small transfer is done by then), then calls
// MPI_Wait, which progresses the request at Open MPI's own speed; it and the blocking calls are
// timed by the watchdog (mpi_watchdog.h). Where the watchdog cannot be used
// (below MPI_THREAD_MULTIPLE) nothing runs blocking and wait() polls MPI_Test, spinning with
// yields for the first milliseconds, then with short sleeps so oversubscribed ranks leave the
// cores to their peers.
// Then the call's finishing step (dividing for avg, rounding 16-bit staging buffers back) runs
// exactly once. A wait that outlasts the timeout aborts the job, naming the rank, the operation
// and the group.
#pragma once

#include <mpi.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "parallel/comm/communicator.h"
#include "parallel/comm/mpi_call.h"
#include "parallel/comm/mpi_ring.h"

namespace tessera::parallel {

// What names a call in its errors and timeout. Both names live as long as the process, so an
// MpiWork that outlives its communicator and the watchdog (mpi_watchdog.h) may read them at any
// time: `op` is a literal, `group` views the communicator's interned name (Communicator::name()).
struct MpiWorkInfo {
  const char* op = "";     // "all_reduce", ...
  std::string_view group;  // the communicator's name
  double timeout_s = 300;  // seconds wait() may block
};

class MpiWork : public Work {
 public:
  // Starts `call`; throws (TS_MPI_CHECK) when MPI refuses it.
  static std::shared_ptr<MpiWork> start(MpiCall call, MpiWorkInfo info);
  // Starts an all_reduce or reduce_scatter as a ring over `ring_comm` (see mpi_ring.h).
  static std::shared_ptr<MpiWork> start_ring(MpiCall call, MpiWorkInfo info,
                                             std::shared_ptr<const MpiComm> ring_comm,
                                             int tag_base);
  // Runs `call` as the blocking MPI call (runs_blocking(call) must hold), finishes it and returns
  // a completed work.
  static WorkPtr run_blocking(const MpiCall& call, const MpiWorkInfo& info);
  // A work for a request already started (internal handshakes); nothing to finish.
  MpiWork(MPI_Request request, MpiWorkInfo info);
  // For start() only (make_shared needs a public constructor; Key keeps it private).
  class Key {
    friend class MpiWork;
    Key() = default;
  };
  MpiWork(Key, MpiCall call, MpiWorkInfo info);
  // An unfinished work is waited for here (MPI may still write into its buffers); never throws.
  ~MpiWork() override;

  void wait() override;
  bool is_completed() override;

 private:
  // Tests the request once; on completion finishes the call.
  bool poll();
  void finish();
  // Polls until done, or aborts the job at the timeout.
  void poll_until_done();

  std::mutex mutex_;  // wait() / is_completed() from several threads
  MpiCall call_;      // the operation's buffers, held until it completes
  MpiWorkInfo info_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  std::unique_ptr<RingCollective> ring_;  // instead of request_, for a ring collective
  // Atomic so the destructor can see a finished work without taking the lock.
  std::atomic<bool> done_{false};
};

}  // namespace tessera::parallel

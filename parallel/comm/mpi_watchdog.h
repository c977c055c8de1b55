// The timeout of blocking MPI calls (MPI_Wait), which cannot time out by themselves: a background thread
// (started on first use) looks at every thread's armed call every 50 ms and ends the job with
// "[op] timed out after S s in group G" once it has been armed longer than its timeout (to within
// the 50 ms period). Arming costs a few plain stores and disarming one compare-and-swap, so every
// blocking call can afford it. Internal.
#pragma once

namespace tessera::parallel {

struct MpiWorkInfo;

// RAII: arms the watchdog for one blocking call of this thread; `info` must outlive the guard.
// armed() is false when MPI runs below MPI_THREAD_MULTIPLE (the watchdog's MPI_Abort must be
// legal while another thread is inside MPI) or when this thread already has an armed call; the
// caller then takes the nonblocking path.
class BlockingCallGuard {
 public:
  explicit BlockingCallGuard(const MpiWorkInfo& info);
  ~BlockingCallGuard();
  BlockingCallGuard(const BlockingCallGuard&) = delete;
  BlockingCallGuard& operator=(const BlockingCallGuard&) = delete;

  bool armed() const { return armed_; }

 private:
  bool armed_ = false;
};

}  // namespace tessera::parallel

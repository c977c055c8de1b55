// StepWorker: one background thread that runs posted tasks in order. The overlapped offload step
// (sharded_optimizer.h) posts each reduced gradient range's optimizer update here, so the host
// steps it while the caller's thread goes on with the backward of the layers not yet reduced.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace tessera::parallel::zero {

class StepWorker {
 public:
  StepWorker() = default;
  // Waits for the tasks still queued (their errors are dropped: a destructor cannot throw).
  ~StepWorker();
  StepWorker(const StepWorker&) = delete;
  StepWorker& operator=(const StepWorker&) = delete;

  // Queues `task`; the thread starts with the first one.
  void post(std::function<void()> task);
  // Blocks until every posted task has run; rethrows the first error one of them threw since the
  // last drain() (the tasks after it still ran).
  void drain();

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> tasks_;
  bool busy_ = false;  // the thread is running a task it took off the queue
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace tessera::parallel::zero

#include "parallel/comm/mpi_work.h"

#include <cstdio>
#include <exception>
#include <thread>

#include "core/error.h"
#include "parallel/comm/mpi_check.h"
#include "parallel/comm/mpi_runtime.h"

namespace tessera::parallel {

MpiWork::MpiWork(MPI_Request request, MpiWorkInfo info, std::function<void()> finish,
                 std::vector<Tensor> keep_alive)
    : request_(request),
      info_(std::move(info)),
      finish_(std::move(finish)),
      keep_alive_(std::move(keep_alive)) {}

MpiWork::~MpiWork() {
  try {
    if (mpi_active()) wait();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: [%s] failed while its Work was destroyed: %s\n", world_rank(),
                 info_.op, e.what());
  }
}

bool MpiWork::poll() {
  if (done_) return true;
  int flag = 0;
  {
    auto lock = mpi_lock();
    TS_MPI_CHECK(MPI_Test(&request_, &flag, MPI_STATUS_IGNORE));
  }
  if (!flag) return false;
  done_ = true;
  if (finish_) finish_();
  finish_ = nullptr;
  keep_alive_.clear();
  return true;
}

bool MpiWork::is_completed() {
  std::lock_guard<std::mutex> lock(mutex_);
  return poll();
}

void MpiWork::wait() {
  std::lock_guard<std::mutex> lock(mutex_);
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(info_.timeout_s));
  // Spin briefly for latency, then back off so oversubscribed ranks leave the cores to peers.
  for (int iter = 0; !poll(); ++iter) {
    if (iter < 64) {
      std::this_thread::yield();
      continue;
    }
    if (Clock::now() > deadline) {
      abort_job(str_cat("[", info_.op, "] timed out after ", info_.timeout_s, " s in group ",
                        info_.group));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(iter < 1024 ? 20 : 200));
  }
}

}  // namespace tessera::parallel

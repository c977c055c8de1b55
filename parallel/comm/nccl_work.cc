#include "parallel/comm/nccl_work.h"

#include <chrono>
#include <cstdio>
#include <exception>
#include <thread>

#include "parallel/comm/mpi_runtime.h"
#include "parallel/comm/nccl_check.h"

namespace tessera::parallel {

NcclWork::NcclWork(ncclComm_t comm, cudaStream_t stream, int device, NcclWorkInfo info,
                   std::vector<Tensor> keep_alive)
    : comm_(comm), device_(device), info_(std::move(info)), keep_alive_(std::move(keep_alive)) {
  TS_COMM_CUDA_CHECK(cudaSetDevice(device_));
  TS_COMM_CUDA_CHECK(cudaEventCreateWithFlags(&done_event_, cudaEventDisableTiming));
  TS_COMM_CUDA_CHECK(cudaEventRecord(done_event_, stream));
}

NcclWork::~NcclWork() {
  try {
    wait();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: [%s] failed while its Work was destroyed: %s\n", world_rank(),
                 info_.op, e.what());
  }
  if (done_event_ != nullptr) cudaEventDestroy(done_event_);
}

bool NcclWork::poll() {
  if (done_) return true;
  cudaError_t status = cudaEventQuery(done_event_);
  if (status == cudaErrorNotReady) {
    ncclResult_t async = ncclSuccess;
    TS_NCCL_CHECK(ncclCommGetAsyncError(comm_, &async));
    TS_NCCL_CHECK(async);
    return false;
  }
  TS_COMM_CUDA_CHECK(status);
  done_ = true;
  keep_alive_.clear();
  return true;
}

bool NcclWork::is_completed() {
  std::lock_guard<std::mutex> lock(mutex_);
  return poll();
}

void NcclWork::wait() {
  std::lock_guard<std::mutex> lock(mutex_);
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(info_.timeout_s));
  for (int iter = 0; !poll(); ++iter) {
    if (Clock::now() > deadline) {
      // Abort the NCCL communicator first so its kernels stop spinning on the GPU.
      ncclCommAbort(comm_);
      abort_job(str_cat("[", info_.op, "] timed out after ", info_.timeout_s, " s in group ",
                        info_.group));
    }
    if (iter < 64) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(iter < 1024 ? 10 : 100));
    }
  }
}

}  // namespace tessera::parallel

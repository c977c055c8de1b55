// The Work handle of NCCL calls: a CUDA event recorded on the communicator's stream after them.
// wait() polls the event (and NCCL's asynchronous error state) so a stuck collective aborts the
// job after the timeout, naming the rank, the operation and the group.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <mutex>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "parallel/comm/communicator.h"

namespace tessera::parallel {

struct NcclWorkInfo {
  const char* op = "";
  std::string group;
  double timeout_s = 300;
};

class NcclWork : public Work {
 public:
  // Records the completion event on `stream` now; `keep_alive` holds the buffers until done.
  NcclWork(ncclComm_t comm, cudaStream_t stream, int device, NcclWorkInfo info,
           std::vector<Tensor> keep_alive);
  ~NcclWork() override;  // waits for unfinished work; never throws

  void wait() override;
  bool is_completed() override;

 private:
  bool poll();

  std::mutex mutex_;
  ncclComm_t comm_;
  int device_;
  cudaEvent_t done_event_ = nullptr;
  NcclWorkInfo info_;
  std::vector<Tensor> keep_alive_;
  bool done_ = false;
};

}  // namespace tessera::parallel

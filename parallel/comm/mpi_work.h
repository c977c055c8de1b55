// The Work handle of a nonblocking MPI call: polls MPI_Test until the request completes, then runs
// the call's finishing step (unpacking 16-bit results, dividing for avg) exactly once. A wait that
// outlasts the timeout aborts the job, naming the rank, the operation and the group. Internal (it
// includes mpi.h): only the MPI sources of parallel/comm include it; users see the Work interface.
#pragma once

#include <mpi.h>

#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "parallel/comm/communicator.h"

namespace tessera::parallel {

struct MpiWorkInfo {
  const char* op = "";     // "all_reduce", ...
  std::string group;       // the communicator's name
  double timeout_s = 300;  // seconds wait() may block
};

class MpiWork : public Work {
 public:
  // Owns `request`; `keep_alive` holds every buffer MPI reads or writes until completion.
  MpiWork(MPI_Request request, MpiWorkInfo info, std::function<void()> finish,
          std::vector<Tensor> keep_alive);
  // An unfinished work is waited for here (MPI may still write into its buffers); never throws.
  ~MpiWork() override;

  void wait() override;
  bool is_completed() override;

 private:
  // Tests the request once; on completion runs finish_ and releases the buffers.
  bool poll();

  std::mutex mutex_;
  MPI_Request request_;
  MpiWorkInfo info_;
  std::function<void()> finish_;
  std::vector<Tensor> keep_alive_;
  bool done_ = false;
};

}  // namespace tessera::parallel

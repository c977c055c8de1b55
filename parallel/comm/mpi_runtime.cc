#include "parallel/comm/mpi_runtime.h"

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <thread>

#include "core/error.h"
#include "parallel/comm/mpi_check.h"
#include "parallel/comm/mpi_communicator.h"
#include "parallel/comm/mpi_handle.h"
#include "parallel/comm/mpi_work.h"

namespace tessera::parallel {
namespace {
std::atomic<bool> g_runtime_alive{false};
}  // namespace

bool mpi_active() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

int world_rank() {
  if (!mpi_active()) return -1;
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

MpiRuntime::MpiRuntime(int* argc, char*** argv) : shutdown_comm_(std::make_unique<MpiComm>()) {
  TS_CHECK(!g_runtime_alive.exchange(true), "mpi",
           "expected one MpiRuntime per process, got a second one while the first is alive");
  try {
    int finalized = 0;
    MPI_Finalized(&finalized);
    TS_CHECK(!finalized, "mpi",
             "expected MPI not yet finalised, got an MpiRuntime after MPI_Finalize "
             "(MPI cannot be initialised twice in one process)");
    int initialized = 0;
    MPI_Initialized(&initialized);
    int provided = MPI_THREAD_SINGLE;
    if (!initialized) {
      TS_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
      owns_mpi_ = true;
    } else {
      TS_MPI_CHECK(MPI_Query_thread(&provided));
    }
    thread_multiple_ = provided >= MPI_THREAD_MULTIPLE;
    set_mpi_thread_multiple(thread_multiple_);
    TS_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
    TS_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
    set_error_rank(rank_);
    world_ = MpiCommunicator::duplicate(MpiComm{MPI_COMM_WORLD}, "world");
    TS_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &shutdown_comm_->comm));
  } catch (...) {
    g_runtime_alive.store(false);
    throw;
  }
}

MpiRuntime::~MpiRuntime() {
  MPI_Comm& shutdown_comm = shutdown_comm_->comm;
  if (owns_mpi_ && mpi_active() && shutdown_comm != MPI_COMM_NULL) {
    // A rank that finalises while its peers still wait for it in a collective can leave mpirun
    // hanging after the peers abort. A timed barrier first makes a rank that ends early abort the
    // job too (after the timeout), so every rank either finalises together or aborts.
    try {
      MPI_Request req;
      {
        auto lock = mpi_lock();
        TS_MPI_CHECK(MPI_Ibarrier(shutdown_comm, &req));
      }
      MpiWork(req, MpiWorkInfo{"finalize", world_->name(), world_->timeout_s()}).wait();
    } catch (const std::exception& e) {
      abort_job(e.what());
    }
  }
  // Communicators still held elsewhere skip MPI_Comm_free once MPI is finalised.
  world_.reset();
  if (shutdown_comm != MPI_COMM_NULL && mpi_active()) MPI_Comm_free(&shutdown_comm);
  if (owns_mpi_ && mpi_active()) MPI_Finalize();
  set_error_rank(-1);  // later messages of this process are no longer a rank's
  g_runtime_alive.store(false);
}

void abort_job(const std::string& message, int code) {
  int rank = world_rank();
  std::string prefix = rank >= 0 ? str_cat("rank ", rank, ": ") : std::string();
  bool has_prefix = !prefix.empty() && message.rfind(prefix, 0) == 0;
  std::fprintf(stderr, "%s%s\n", has_prefix ? "" : prefix.c_str(), message.c_str());
  std::fflush(stderr);
  std::fflush(stdout);
  if (mpi_active()) {
    int size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size > 1) MPI_Abort(MPI_COMM_WORLD, code);
    // One rank has no peer to stop, and MPI_Abort would only add Open MPI's MPI_ABORT banner (and,
    // without mpirun, ORTE unpack errors): finalise so mpirun sees a clean end, then exit with the
    // code. MPI_Finalize belongs to the thread that started MPI; should it hang (a request still
    // in flight on another thread), the exit goes ahead without it after a few seconds.
    int is_main = 0;
    MPI_Is_thread_main(&is_main);
    if (is_main) {
      std::thread([code] {
        std::this_thread::sleep_for(std::chrono::seconds(5));
        std::_Exit(code);
      }).detach();
      auto lock = mpi_lock();
      MPI_Finalize();
    }
  }
  std::_Exit(code);
}

int run_distributed(int argc, char** argv, const DistributedMain& fn) {
  std::unique_ptr<MpiRuntime> runtime;
  try {
    runtime = std::make_unique<MpiRuntime>(&argc, &argv);
  } catch (const std::exception& e) {
    abort_job(e.what());
  }
  int code = 0;
  // The runtime must outlive this block: unwinding into MPI_Finalize while peers still wait in a
  // collective would hang them, so every failure aborts from here.
  try {
    code = fn(runtime->world());
  } catch (const PeerError& e) {
    // Another rank raised this and is aborting the job with the same message: give its abort time
    // to land so the message is printed once, by the rank it belongs to.
    std::this_thread::sleep_for(std::chrono::seconds(10));
    abort_job(e.what());
  } catch (const std::exception& e) {
    abort_job(e.what());
  } catch (...) {
    abort_job("unknown exception");
  }
  if (code != 0) abort_job(str_cat("exiting with code ", code), code);
  runtime.reset();
  return 0;
}

}  // namespace tessera::parallel

// MPI helpers: the check macro that turns a failed MPI call into an exception naming the call, file
// and line; the lock that serialises MPI calls when the library lacks MPI_THREAD_MULTIPLE; and the
// mapping of Tessera dtypes and reduce ops to MPI's. Internal (it includes mpi.h): only the MPI
// sources of parallel/comm include it, and it is not installed.
#pragma once

#include <mpi.h>

#include <mutex>

#include "core/dtype.h"
#include "parallel/comm/comm_types.h"

namespace tessera::parallel {

[[noreturn]] void throw_mpi_error(int code, const char* call, const char* file, int line);

// Held around every MPI call: a real lock when MPI runs at a thread level below
// MPI_THREAD_MULTIPLE (calls must then never overlap), an empty one otherwise.
std::unique_lock<std::mutex> mpi_lock();
// Set once by MpiRuntime from the thread level MPI provided.
void set_mpi_thread_multiple(bool multiple);
// True when MPI provides MPI_THREAD_MULTIPLE (as set by MpiRuntime).
bool mpi_thread_multiple();

// The datatype that carries `dtype` bit for bit (16-bit floats as MPI_UINT16_T, bool as
// MPI_UINT8_T): right for moving data, not for reducing 16-bit floats (see MpiCommunicator).
MPI_Datatype mpi_transport_type(DType dtype);
// The MPI op for `op` on `dtype` (avg reduces with MPI_SUM and divides afterwards; bool maps sum
// and max to MPI_LOR, min and prod to MPI_LAND).
MPI_Op mpi_reduce_op(ReduceOp op, DType dtype);

}  // namespace tessera::parallel

// TS_MPI_CHECK(MPI_Barrier(comm)): throws InternalError "[mpi] MPI_Barrier(comm) failed: <MPI's
// message> (file:line)" when the call does not return MPI_SUCCESS.
#define TS_MPI_CHECK(call)                                                   \
  do {                                                                       \
    int ts_mpi_rc_ = (call);                                                 \
    if (ts_mpi_rc_ != MPI_SUCCESS) [[unlikely]]                              \
      ::tessera::parallel::throw_mpi_error(ts_mpi_rc_, #call, __FILE__, __LINE__); \
  } while (0)

// The MPI object behind the opaque MpiComm handle of the public MPI classes. Internal: only the
// MPI sources of parallel/comm include it, so mpi.h (and Open MPI's C++ bindings) never reach a
// program that includes Tessera's public headers.
#pragma once

#include <mpi.h>

namespace tessera::parallel {

// An MPI communicator handle as MpiCommunicator and MpiRuntime hold it (ownership is theirs).
struct MpiComm {
  MPI_Comm comm = MPI_COMM_NULL;
};

}  // namespace tessera::parallel

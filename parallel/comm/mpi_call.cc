#include "parallel/comm/mpi_call.h"

#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "parallel/comm/mpi_check.h"

namespace tessera::parallel {
namespace {

bool is_reduction(CommKind kind) {
  return kind == CommKind::all_reduce || kind == CommKind::reduce_scatter ||
         kind == CommKind::reduce;
}

// Where MPI leaves a reduction's result on this rank.
const Tensor& reduced_buffer(const MpiCall& c) {
  return c.kind == CommKind::reduce_scatter ? c.out : c.in;
}

MPI_Op reduce_op_of(const MpiCall& c) { return mpi_reduce_op(c.op, reduced_buffer(c).dtype()); }

}  // namespace

bool MpiCall::needs_finish() const {
  if (!is_reduction(kind) || (kind == CommKind::reduce && rank != root)) return false;
  return result->defined() || (op == ReduceOp::avg && group_size > 1);
}

MPI_Request start_call(const MpiCall& c) {
  MPI_Request req = MPI_REQUEST_NULL;
  auto lock = mpi_lock();
  switch (c.kind) {
    case CommKind::all_reduce:
      TS_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, c.in->data_ptr(), c.count, c.type, reduce_op_of(c),
                                  c.comm, &req));
      break;
    case CommKind::reduce_scatter:
      TS_MPI_CHECK(MPI_Ireduce_scatter_block(c.in->data_ptr(), c.out->data_ptr(), c.count, c.type,
                                             reduce_op_of(c), c.comm, &req));
      break;
    case CommKind::all_gather:
      TS_MPI_CHECK(MPI_Iallgather(c.in->data_ptr(), c.count, c.type, c.out->data_ptr(), c.count,
                                  c.type, c.comm, &req));
      break;
    case CommKind::broadcast:
      TS_MPI_CHECK(MPI_Ibcast(c.in->data_ptr(), c.count, c.type, c.root, c.comm, &req));
      break;
    case CommKind::reduce: {
      const bool is_root = c.rank == c.root;
      TS_MPI_CHECK(MPI_Ireduce(is_root ? MPI_IN_PLACE : c.in->data_ptr(),
                               is_root ? c.in->data_ptr() : nullptr, c.count, c.type,
                               reduce_op_of(c), c.root, c.comm, &req));
      break;
    }
    case CommKind::all_to_all:
      TS_MPI_CHECK(MPI_Ialltoall(c.in->data_ptr(), c.count, c.type, c.out->data_ptr(), c.count,
                                 c.type, c.comm, &req));
      break;
    case CommKind::send:
      TS_MPI_CHECK(MPI_Isend(c.in->data_ptr(), c.count, c.type, c.peer, c.tag, c.comm, &req));
      break;
    case CommKind::recv:
      TS_MPI_CHECK(MPI_Irecv(c.in->data_ptr(), c.count, c.type, c.peer, c.tag, c.comm, &req));
      break;
    case CommKind::barrier: TS_MPI_CHECK(MPI_Ibarrier(c.comm, &req)); break;
  }
  return req;
}

namespace {

// The largest payload (bytes of the whole buffer: all_gather's output, the input otherwise) that
// runs blocking, per kind. Measured with `mpirun -np 2 tessera bench comm` (2 ranks on one host,
// Open MPI 4.1, shared memory): below these sizes the blocking call is faster than the nonblocking
// one waited at once; above them they are level (or, for all_reduce, our own schedule of
// nonblocking sends and receives, mpi_ring.h, is faster).
int64_t blocking_max_bytes(CommKind kind) {
  constexpr int64_t KB = 1024;
  switch (kind) {
    case CommKind::all_reduce: return 8 * KB;
    case CommKind::reduce_scatter: return 64 * KB;
    case CommKind::all_gather: return 4096 * KB;
    case CommKind::broadcast: return 64 * KB;
    // ZeRO stage 2 reduces its gradient buckets to their owners while backward goes on, and
    // MPI_Ireduce sums in the order our all_reduce does (a tree), which MPI_Reduce does not, so a
    // stage 2 run keeps stage 0's numbers.
    case CommKind::reduce: return -1;
    case CommKind::all_to_all: return 256 * KB;
    case CommKind::barrier: return INT64_MAX;
    case CommKind::send:
    case CommKind::recv: return -1;
  }
  return -1;
}

// TESSERA_MPI_BLOCKING=0 turns the blocking path off (tests use it to run the nonblocking paths
// on small tensors too); read once, so it is the same for every call of a job.
bool blocking_enabled() {
  static const bool enabled = [] {
    const char* env = std::getenv("TESSERA_MPI_BLOCKING");
    if (env == nullptr || *env == '\0') return true;
    const std::string v = env;
    TS_CHECK(v == "0" || v == "1", "comm", "expected TESSERA_MPI_BLOCKING to be 0 or 1, got '", v,
             "'");
    return v == "1";
  }();
  return enabled;
}

}  // namespace

bool runs_blocking(const MpiCall& c) {
  // Below MPI_THREAD_MULTIPLE the watchdog cannot time a blocking call (mpi_watchdog.h), and the
  // MPI lock would be held for the whole call.
  if (!mpi_thread_multiple() || !blocking_enabled()) return false;
  const Tensor& buffer = c.kind == CommKind::all_gather ? c.out : c.in;
  const int64_t bytes = buffer.defined() ? buffer.numel() * int64_t(buffer.itemsize()) : 0;
  return bytes <= blocking_max_bytes(c.kind);
}

void run_blocking_call(const MpiCall& c) {
  switch (c.kind) {
    case CommKind::all_reduce:
      TS_MPI_CHECK(
          MPI_Allreduce(MPI_IN_PLACE, c.in->data_ptr(), c.count, c.type, reduce_op_of(c), c.comm));
      break;
    case CommKind::reduce_scatter:
      TS_MPI_CHECK(MPI_Reduce_scatter_block(c.in->data_ptr(), c.out->data_ptr(), c.count, c.type,
                                            reduce_op_of(c), c.comm));
      break;
    case CommKind::all_gather:
      TS_MPI_CHECK(MPI_Allgather(c.in->data_ptr(), c.count, c.type, c.out->data_ptr(), c.count,
                                 c.type, c.comm));
      break;
    case CommKind::broadcast:
      TS_MPI_CHECK(MPI_Bcast(c.in->data_ptr(), c.count, c.type, c.root, c.comm));
      break;
    case CommKind::all_to_all:
      TS_MPI_CHECK(MPI_Alltoall(c.in->data_ptr(), c.count, c.type, c.out->data_ptr(), c.count,
                                c.type, c.comm));
      break;
    case CommKind::barrier: TS_MPI_CHECK(MPI_Barrier(c.comm)); break;
    case CommKind::reduce:
    case CommKind::send:
    case CommKind::recv:
      TS_FAIL("mpi", "expected all_reduce, reduce_scatter, all_gather, broadcast, all_to_all or "
                     "barrier for the blocking path");
  }
}

void finish_call(const MpiCall& c) {
  if (!c.needs_finish()) return;
  const Tensor& buffer = reduced_buffer(c);
  if (c.op == ReduceOp::avg && c.group_size > 1) {
    dispatch_floating(buffer.dtype(), "all_reduce", [&]<typename T>() {
      T* p = buffer.data<T>();
      const float n = float(c.group_size);
      for (int64_t i = 0, e = buffer.numel(); i < e; ++i) p[i] = T(float(p[i]) / n);
    });
  }
  if (c.result->defined() && !c.result->is_same(buffer)) c.result->copy_(buffer);
}

}  // namespace tessera::parallel

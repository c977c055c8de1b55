#include "parallel/comm/mpi_call.h"

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
  return result.defined() || (op == ReduceOp::avg && group_size > 1);
}

MPI_Request start_call(const MpiCall& c) {
  MPI_Request req = MPI_REQUEST_NULL;
  auto lock = mpi_lock();
  switch (c.kind) {
    case CommKind::all_reduce:
      TS_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, c.in.data_ptr(), c.count, c.type, reduce_op_of(c),
                                  c.comm, &req));
      break;
    case CommKind::reduce_scatter:
      TS_MPI_CHECK(MPI_Ireduce_scatter_block(c.in.data_ptr(), c.out.data_ptr(), c.count, c.type,
                                             reduce_op_of(c), c.comm, &req));
      break;
    case CommKind::all_gather:
      TS_MPI_CHECK(MPI_Iallgather(c.in.data_ptr(), c.count, c.type, c.out.data_ptr(), c.count,
                                  c.type, c.comm, &req));
      break;
    case CommKind::broadcast:
      TS_MPI_CHECK(MPI_Ibcast(c.in.data_ptr(), c.count, c.type, c.root, c.comm, &req));
      break;
    case CommKind::reduce: {
      const bool is_root = c.rank == c.root;
      TS_MPI_CHECK(MPI_Ireduce(is_root ? MPI_IN_PLACE : c.in.data_ptr(),
                               is_root ? c.in.data_ptr() : nullptr, c.count, c.type,
                               reduce_op_of(c), c.root, c.comm, &req));
      break;
    }
    case CommKind::all_to_all:
      TS_MPI_CHECK(MPI_Ialltoall(c.in.data_ptr(), c.count, c.type, c.out.data_ptr(), c.count,
                                 c.type, c.comm, &req));
      break;
    case CommKind::send:
      TS_MPI_CHECK(MPI_Isend(c.in.data_ptr(), c.count, c.type, c.peer, c.tag, c.comm, &req));
      break;
    case CommKind::recv:
      TS_MPI_CHECK(MPI_Irecv(c.in.data_ptr(), c.count, c.type, c.peer, c.tag, c.comm, &req));
      break;
    case CommKind::barrier: TS_MPI_CHECK(MPI_Ibarrier(c.comm, &req)); break;
  }
  return req;
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
  if (c.result.defined() && !c.result.is_same(buffer)) c.result.copy_(buffer);
}

}  // namespace tessera::parallel

#include "parallel/comm/mpi_communicator.h"

#include "core/error.h"
#include "core/factory.h"
#include "parallel/comm/mpi_check.h"
#include "parallel/comm/mpi_handle.h"
#include "parallel/comm/mpi_runtime.h"
#include "parallel/comm/mpi_work.h"

namespace tessera::parallel {
namespace {

bool is_16bit_float(DType t) { return t == DType::f16 || t == DType::bf16; }

// The buffer MPI reduces: the tensor itself, or an f32 copy of a 16-bit float tensor.
Tensor reduce_buffer(const Tensor& t) { return is_16bit_float(t.dtype()) ? t.to(DType::f32) : t; }

// After a reduction into `buffer`: divide for avg, then round back into `dst` if they differ.
void finish_reduce(const Tensor& buffer, const Tensor& dst, ReduceOp op, int group_size) {
  if (op == ReduceOp::avg && group_size > 1) {
    dispatch_floating(buffer.dtype(), "all_reduce", [&]<typename T>() {
      T* p = buffer.data<T>();
      const float n = float(group_size);
      for (int64_t i = 0, e = buffer.numel(); i < e; ++i) p[i] = T(float(p[i]) / n);
    });
  }
  if (!buffer.is_same(dst)) dst.copy_(buffer);
}

MPI_Datatype reduce_type(const Tensor& buffer) { return mpi_transport_type(buffer.dtype()); }

int count_of(const Tensor& t) {
  TS_CHECK(t.numel() <= int64_t(INT32_MAX), "mpi",
           "expected at most 2^31 - 1 elements per call, got ", t.describe());
  return int(t.numel());
}

WorkPtr make_work(const Communicator& comm, MPI_Request request, const char* op,
                  std::function<void()> finish, std::vector<Tensor> keep_alive) {
  return std::make_shared<MpiWork>(request, MpiWorkInfo{op, comm.name(), comm.timeout_s()},
                                   std::move(finish), std::move(keep_alive));
}

}  // namespace

std::shared_ptr<MpiCommunicator> MpiCommunicator::duplicate(const MpiComm& comm,
                                                            const std::string& name) {
  TS_CHECK(mpi_active(), "mpi", "expected MPI to be running (create an MpiRuntime first)");
  MPI_Comm dup = MPI_COMM_NULL;
  {
    auto lock = mpi_lock();
    TS_MPI_CHECK(MPI_Comm_dup(comm.comm, &dup));
  }
  return std::make_shared<MpiCommunicator>(MpiComm{dup}, name);
}

MpiCommunicator::MpiCommunicator(const MpiComm& comm, std::string name)
    : Communicator(std::move(name)), comm_(std::make_unique<MpiComm>(comm)) {
  auto lock = mpi_lock();
  TS_MPI_CHECK(MPI_Comm_set_errhandler(comm_->comm, MPI_ERRORS_RETURN));
  TS_MPI_CHECK(MPI_Comm_rank(comm_->comm, &rank_));
  TS_MPI_CHECK(MPI_Comm_size(comm_->comm, &size_));
}

MpiCommunicator::~MpiCommunicator() {
  if (comm_->comm != MPI_COMM_NULL && mpi_active()) {
    auto lock = mpi_lock();
    MPI_Comm_free(&comm_->comm);
  }
}

WorkPtr MpiCommunicator::do_all_reduce(const Tensor& t, ReduceOp op) {
  Tensor buf = reduce_buffer(t);
  MPI_Request req;
  {
    auto lock = mpi_lock();
    TS_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf.data_ptr(), count_of(buf), reduce_type(buf),
                                mpi_reduce_op(op, buf.dtype()), comm_->comm, &req));
  }
  int p = size_;
  return make_work(*this, req, "all_reduce", [buf, t, op, p] { finish_reduce(buf, t, op, p); },
                   {buf, t});
}

WorkPtr MpiCommunicator::do_reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op) {
  Tensor in_buf = reduce_buffer(in);
  Tensor out_buf = is_16bit_float(out.dtype()) ? empty(out.shape(), {.dtype = DType::f32}) : out;
  MPI_Request req;
  {
    auto lock = mpi_lock();
    TS_MPI_CHECK(MPI_Ireduce_scatter_block(in_buf.data_ptr(), out_buf.data_ptr(), count_of(out_buf),
                                           reduce_type(out_buf), mpi_reduce_op(op, out_buf.dtype()),
                                           comm_->comm, &req));
  }
  int p = size_;
  return make_work(*this, req, "reduce_scatter",
                   [out_buf, out, op, p] { finish_reduce(out_buf, out, op, p); },
                   {in_buf, out_buf, in, out});
}

WorkPtr MpiCommunicator::do_all_gather(const Tensor& in, const Tensor& out) {
  MPI_Datatype type = mpi_transport_type(in.dtype());
  MPI_Request req;
  {
    auto lock = mpi_lock();
    TS_MPI_CHECK(MPI_Iallgather(in.data_ptr(), count_of(in), type, out.data_ptr(), count_of(in),
                                type, comm_->comm, &req));
  }
  return make_work(*this, req, "all_gather", nullptr, {in, out});
}

WorkPtr MpiCommunicator::do_broadcast(const Tensor& t, int root) {
  MPI_Request req;
  {
    auto lock = mpi_lock();
    TS_MPI_CHECK(MPI_Ibcast(t.data_ptr(), count_of(t), mpi_transport_type(t.dtype()), root,
                            comm_->comm, &req));
  }
  return make_work(*this, req, "broadcast", nullptr, {t});
}

WorkPtr MpiCommunicator::do_reduce(const Tensor& t, int root, ReduceOp op) {
  Tensor buf = reduce_buffer(t);
  bool is_root = rank_ == root;
  MPI_Request req;
  {
    auto lock = mpi_lock();
    TS_MPI_CHECK(MPI_Ireduce(is_root ? MPI_IN_PLACE : buf.data_ptr(),
                             is_root ? buf.data_ptr() : nullptr, count_of(buf), reduce_type(buf),
                             mpi_reduce_op(op, buf.dtype()), root, comm_->comm, &req));
  }
  int p = size_;
  std::function<void()> finish;
  if (is_root) finish = [buf, t, op, p] { finish_reduce(buf, t, op, p); };
  return make_work(*this, req, "reduce", std::move(finish), {buf, t});
}

WorkPtr MpiCommunicator::do_all_to_all(const Tensor& in, const Tensor& out) {
  MPI_Datatype type = mpi_transport_type(in.dtype());
  int chunk = count_of(in) / size_;
  MPI_Request req;
  {
    auto lock = mpi_lock();
    TS_MPI_CHECK(
        MPI_Ialltoall(in.data_ptr(), chunk, type, out.data_ptr(), chunk, type, comm_->comm, &req));
  }
  return make_work(*this, req, "all_to_all", nullptr, {in, out});
}

WorkPtr MpiCommunicator::do_send(const Tensor& t, int peer, int tag) {
  MPI_Request req;
  {
    auto lock = mpi_lock();
    TS_MPI_CHECK(MPI_Isend(t.data_ptr(), count_of(t), mpi_transport_type(t.dtype()), peer, tag,
                           comm_->comm, &req));
  }
  return make_work(*this, req, "send", nullptr, {t});
}

WorkPtr MpiCommunicator::do_recv(const Tensor& t, int peer, int tag) {
  MPI_Request req;
  {
    auto lock = mpi_lock();
    TS_MPI_CHECK(MPI_Irecv(t.data_ptr(), count_of(t), mpi_transport_type(t.dtype()), peer, tag,
                           comm_->comm, &req));
  }
  return make_work(*this, req, "recv", nullptr, {t});
}

WorkPtr MpiCommunicator::do_barrier() {
  MPI_Request req;
  {
    auto lock = mpi_lock();
    TS_MPI_CHECK(MPI_Ibarrier(comm_->comm, &req));
  }
  return make_work(*this, req, "barrier", nullptr, {});
}

std::shared_ptr<Communicator> MpiCommunicator::split(int color, int key, const std::string& name) {
  // MPI_Comm_split blocks and has no nonblocking form. A timed all-gather first makes sure every
  // rank has arrived, so a missing rank aborts the job instead of hanging it. It bypasses the
  // public all_gather so the handshake does not show in the byte counters.
  Tensor mine = from_vector<int64_t>({color, key}, {2});
  Tensor all = empty({2 * int64_t(size_)}, {.dtype = DType::i64});
  MPI_Request req;
  {
    auto lock = mpi_lock();
    TS_MPI_CHECK(MPI_Iallgather(mine.data_ptr(), 2, MPI_INT64_T, all.data_ptr(), 2, MPI_INT64_T,
                                comm_->comm, &req));
  }
  MpiWork(req, MpiWorkInfo{"split", this->name(), timeout_s()}, nullptr, {mine, all}).wait();

  MPI_Comm sub = MPI_COMM_NULL;
  {
    auto lock = mpi_lock();
    TS_MPI_CHECK(MPI_Comm_split(comm_->comm, color < 0 ? MPI_UNDEFINED : color, key, &sub));
  }
  if (sub == MPI_COMM_NULL) return nullptr;
  auto child = std::make_shared<MpiCommunicator>(
      MpiComm{sub}, name.empty() ? str_cat(this->name(), "/", color) : name);
  child->set_timeout_s(timeout_s());
  return child;
}

}  // namespace tessera::parallel

#include "parallel/comm/mpi_communicator.h"

#include <utility>

#include "core/error.h"
#include "core/factory.h"
#include "parallel/comm/mpi_check.h"
#include "parallel/comm/mpi_handle.h"
#include "parallel/comm/mpi_runtime.h"
#include "parallel/comm/mpi_work.h"

namespace tessera::parallel {
namespace {

bool is_16bit_float(DType t) { return t == DType::f16 || t == DType::bf16; }

int count_of(const Tensor& t) {
  const int64_t n = t.numel();
  TS_CHECK(n <= int64_t(INT32_MAX), "mpi", "expected at most 2^31 - 1 elements per call, got ",
           t.describe());
  return int(n);
}

}  // namespace

MpiCall MpiCommunicator::make_call(CommKind kind, CallTensor in, CallTensor out) const {
  MpiCall c;
  c.kind = kind;
  c.comm = comm_->comm;
  if (in->defined()) {
    c.type = mpi_transport_type(in->dtype());
    c.count = count_of(in);
  }
  c.in = std::move(in);
  c.out = std::move(out);
  c.rank = rank_;
  c.group_size = size_;
  return c;
}

// 16-bit floats are reduced in f32 (see the header): MPI reduces staging copies and the finishing
// step rounds the result back into the caller's tensor.
MpiCall MpiCommunicator::make_reduce_call(CommKind kind, const Tensor& in, const Tensor& out,
                                          ReduceOp op) const {
  const Tensor& dst = kind == CommKind::reduce_scatter ? out : in;
  const bool staged = is_16bit_float(in.dtype());
  // An all_reduce's or a reduce's `out` is an undefined temporary: nothing to borrow. One named
  // call, built in place: moving one costs more than a small blocking call's own overhead.
  MpiCall c =
      staged ? make_call(kind, CallTensor::own(in.to(DType::f32)),
                         CallTensor::own(out.defined() ? empty(out.shape(), {.dtype = DType::f32})
                                                       : Tensor()))
             : make_call(kind, CallTensor::borrow(in),
                         out.defined() ? CallTensor::borrow(out) : CallTensor());
  if (staged) {
    c.result = CallTensor::borrow(dst);
    c.type = MPI_FLOAT;
  }
  c.op = op;
  return c;
}

WorkPtr MpiCommunicator::start_work(MpiCall&& call, const char* op) {
  MpiWorkInfo info{op, name(), timeout_s()};
  if (runs_blocking(call)) return MpiWork::run_blocking(call, info);
  if (use_ring(call)) {
    const int tag_base = int(ring_calls_.fetch_add(1) % 256) * RingCollective::kTagsPerCall;
    return MpiWork::start_ring(std::move(call), std::move(info), ring_comm_, tag_base);
  }
  return MpiWork::start(std::move(call), std::move(info));
}

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
    : Communicator(std::move(name)),
      comm_(std::make_unique<MpiComm>(comm)),
      ring_comm_(new MpiComm{}, [](MpiComm* c) {
        if (c->comm != MPI_COMM_NULL && mpi_active()) {
          auto lock = mpi_lock();
          MPI_Comm_free(&c->comm);
        }
        delete c;
      }) {
  auto lock = mpi_lock();
  TS_MPI_CHECK(MPI_Comm_set_errhandler(comm_->comm, MPI_ERRORS_RETURN));
  TS_MPI_CHECK(MPI_Comm_rank(comm_->comm, &rank_));
  TS_MPI_CHECK(MPI_Comm_size(comm_->comm, &size_));
  // Every rank of `comm` constructs its communicator together (they are made collectively).
  TS_MPI_CHECK(MPI_Comm_dup(comm_->comm, &ring_comm_->comm));
  TS_MPI_CHECK(MPI_Comm_set_errhandler(ring_comm_->comm, MPI_ERRORS_RETURN));
}

MpiCommunicator::~MpiCommunicator() {
  if (comm_->comm != MPI_COMM_NULL && mpi_active()) {
    auto lock = mpi_lock();
    MPI_Comm_free(&comm_->comm);
  }
}

WorkPtr MpiCommunicator::do_all_reduce(const Tensor& t, ReduceOp op) {
  return start_work(make_reduce_call(CommKind::all_reduce, t, Tensor(), op), "all_reduce");
}

WorkPtr MpiCommunicator::do_reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op) {
  MpiCall c = make_reduce_call(CommKind::reduce_scatter, in, out, op);
  c.count = count_of(out);  // MPI counts one rank's block
  return start_work(std::move(c), "reduce_scatter");
}

WorkPtr MpiCommunicator::do_all_gather(const Tensor& in, const Tensor& out) {
  return start_work(
      make_call(CommKind::all_gather, CallTensor::borrow(in), CallTensor::borrow(out)),
      "all_gather");
}

WorkPtr MpiCommunicator::do_broadcast(const Tensor& t, int root) {
  MpiCall c = make_call(CommKind::broadcast, CallTensor::borrow(t), CallTensor());
  c.root = root;
  return start_work(std::move(c), "broadcast");
}

WorkPtr MpiCommunicator::do_reduce(const Tensor& t, int root, ReduceOp op) {
  MpiCall c = make_reduce_call(CommKind::reduce, t, Tensor(), op);
  c.root = root;
  if (rank_ != root) c.result = CallTensor();  // only the root's tensor receives the result
  return start_work(std::move(c), "reduce");
}

WorkPtr MpiCommunicator::do_all_to_all(const Tensor& in, const Tensor& out) {
  MpiCall c = make_call(CommKind::all_to_all, CallTensor::borrow(in), CallTensor::borrow(out));
  c.count /= size_;  // MPI counts one chunk
  return start_work(std::move(c), "all_to_all");
}

WorkPtr MpiCommunicator::do_send(const Tensor& t, int peer, int tag) {
  MpiCall c = make_call(CommKind::send, CallTensor::borrow(t), CallTensor());
  c.peer = peer;
  c.tag = tag;
  return start_work(std::move(c), "send");
}

WorkPtr MpiCommunicator::do_recv(const Tensor& t, int peer, int tag) {
  MpiCall c = make_call(CommKind::recv, CallTensor::borrow(t), CallTensor());
  c.peer = peer;
  c.tag = tag;
  return start_work(std::move(c), "recv");
}

WorkPtr MpiCommunicator::do_barrier() {
  return start_work(make_call(CommKind::barrier, CallTensor(), CallTensor()), "barrier");
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
  MpiWork(req, MpiWorkInfo{"split", this->name(), timeout_s()}).wait();

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

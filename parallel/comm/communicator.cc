// The backend-independent half of every communicator: argument checks with "[op] expected ..."
// messages, byte counters and the timeout setting.
#include "parallel/comm/communicator.h"

#include <cstdlib>
#include <string>

#include "core/error.h"

namespace tessera::parallel {
namespace {

// The largest tag MPI guarantees (MPI_TAG_UB is at least this); NCCL ignores tags.
constexpr int kMaxTag = 32767;

const char* device_type_name(DeviceType type) { return type == DeviceType::cpu ? "cpu" : "cuda"; }

void check_tensor(const char* op, const Tensor& t, const char* what, DeviceType device_type) {
  // `what` is "" or a role with a trailing space ("input ").
  TS_CHECK(t.defined(), op, "expected a defined ", what, "tensor, got an undefined one");
  TS_CHECK(t.device().type == device_type, op, "expected a ", device_type_name(device_type), " ",
           what, "tensor for this backend, got ", t.describe());
  TS_CHECK(t.is_contiguous(), op, "expected a contiguous ", what, "tensor, got ", t.describe(),
           " with strides ", shape_str(t.strides()));
}

void check_same_dtype(const char* op, const Tensor& in, const Tensor& out) {
  TS_CHECK(in.dtype() == out.dtype(), op, "expected input and output of the same dtype, got ",
           in.describe(), " and ", out.describe());
}

void check_reduce_op(const char* op, const Tensor& t, ReduceOp reduce_op) {
  TS_CHECK(reduce_op != ReduceOp::avg || is_floating(t.dtype()), op,
           "expected a floating dtype for avg, got ", t.describe());
}

void check_rank(const char* op, const char* what, int r, int size) {
  TS_CHECK(r >= 0 && r < size, op, "expected ", what, " in [0, ", size, "), got ", r);
}

void check_tag(const char* op, int tag) {
  TS_CHECK(tag >= 0 && tag <= kMaxTag, op, "expected a tag in [0, ", kMaxTag, "], got ", tag);
}

int64_t nbytes(const Tensor& t) { return t.numel() * int64_t(t.itemsize()); }

}  // namespace

void WorkList::wait() {
  for (const WorkPtr& w : works_) w->wait();
}

bool WorkList::is_completed() {
  for (const WorkPtr& w : works_) {
    if (!w->is_completed()) return false;
  }
  return true;
}

double default_comm_timeout_s() {
  const char* env = std::getenv("TESSERA_COMM_TIMEOUT_S");
  if (env == nullptr || *env == '\0') return 300.0;
  char* end = nullptr;
  double v = std::strtod(env, &end);
  TS_CHECK(end != env && *end == '\0' && v > 0, "comm",
           "expected TESSERA_COMM_TIMEOUT_S to be a positive number of seconds, got '", env, "'");
  return v;
}

Communicator::Communicator(std::string name)
    : name_(std::move(name)), timeout_s_(default_comm_timeout_s()) {}

void Communicator::set_timeout_s(double seconds) {
  TS_CHECK(seconds > 0, "comm", "expected a positive timeout, got ", seconds, " s");
  timeout_s_ = seconds;
}

CommStats Communicator::stats() const {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  return stats_;
}

void Communicator::reset_stats() {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  stats_ = CommStats{};
}

void Communicator::record(CommKind kind, int64_t payload_bytes, bool is_root) {
  Traffic traffic = collective_traffic(kind, payload_bytes, size(), is_root);
  std::lock_guard<std::mutex> lock(stats_mutex_);
  CommCounter& c = stats_[kind];
  c.calls += 1;
  c.payload_bytes += payload_bytes;
  c.bytes_sent += traffic.sent;
  c.bytes_received += traffic.received;
}

WorkPtr Communicator::all_reduce(const Tensor& t, ReduceOp op) {
  check_tensor("all_reduce", t, "", device_type());
  check_reduce_op("all_reduce", t, op);
  record(CommKind::all_reduce, nbytes(t), false);
  t.bump_version();
  return do_all_reduce(t, op);
}

WorkPtr Communicator::reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op) {
  check_tensor("reduce_scatter", in, "input ", device_type());
  check_tensor("reduce_scatter", out, "output ", device_type());
  check_same_dtype("reduce_scatter", in, out);
  check_reduce_op("reduce_scatter", in, op);
  TS_CHECK(in.numel() == out.numel() * size(), "reduce_scatter", "expected an input of group size ",
           size(), " x output numel ", out.numel(), " = ", out.numel() * size(),
           " elements, got input ", in.describe(), " and output ", out.describe());
  record(CommKind::reduce_scatter, nbytes(in), false);
  out.bump_version();
  return do_reduce_scatter(in, out, op);
}

WorkPtr Communicator::all_gather(const Tensor& in, const Tensor& out) {
  check_tensor("all_gather", in, "input ", device_type());
  check_tensor("all_gather", out, "output ", device_type());
  check_same_dtype("all_gather", in, out);
  TS_CHECK(out.numel() == in.numel() * size(), "all_gather", "expected an output of group size ",
           size(), " x input numel ", in.numel(), " = ", in.numel() * size(),
           " elements, got input ", in.describe(), " and output ", out.describe());
  record(CommKind::all_gather, nbytes(out), false);
  out.bump_version();
  return do_all_gather(in, out);
}

WorkPtr Communicator::broadcast(const Tensor& t, int root) {
  check_tensor("broadcast", t, "", device_type());
  check_rank("broadcast", "root", root, size());
  record(CommKind::broadcast, nbytes(t), rank() == root);
  if (rank() != root) t.bump_version();
  return do_broadcast(t, root);
}

WorkPtr Communicator::reduce(const Tensor& t, int root, ReduceOp op) {
  check_tensor("reduce", t, "", device_type());
  check_rank("reduce", "root", root, size());
  check_reduce_op("reduce", t, op);
  record(CommKind::reduce, nbytes(t), rank() == root);
  if (rank() == root) t.bump_version();
  return do_reduce(t, root, op);
}

WorkPtr Communicator::all_to_all(const Tensor& in, const Tensor& out) {
  check_tensor("all_to_all", in, "input ", device_type());
  check_tensor("all_to_all", out, "output ", device_type());
  check_same_dtype("all_to_all", in, out);
  TS_CHECK(in.numel() == out.numel() && in.numel() % size() == 0, "all_to_all",
           "expected input and output with the same numel, a multiple of group size ", size(),
           ", got input ", in.describe(), " and output ", out.describe());
  record(CommKind::all_to_all, nbytes(in), false);
  out.bump_version();
  return do_all_to_all(in, out);
}

WorkPtr Communicator::send(const Tensor& t, int peer, int tag) {
  check_tensor("send", t, "", device_type());
  check_rank("send", "peer", peer, size());
  check_tag("send", tag);
  record(CommKind::send, nbytes(t), false);
  return do_send(t, peer, tag);
}

WorkPtr Communicator::recv(const Tensor& t, int peer, int tag) {
  check_tensor("recv", t, "", device_type());
  check_rank("recv", "peer", peer, size());
  check_tag("recv", tag);
  record(CommKind::recv, nbytes(t), false);
  t.bump_version();
  return do_recv(t, peer, tag);
}

WorkPtr Communicator::batch_send_recv(const std::vector<P2POp>& ops) {
  for (const P2POp& p : ops) {
    const char* op = p.kind == P2POp::Kind::send ? "send" : "recv";
    check_tensor(op, p.tensor, "", device_type());
    check_rank(op, "peer", p.peer, size());
    check_tag(op, p.tag);
  }
  for (const P2POp& p : ops) {
    bool is_send = p.kind == P2POp::Kind::send;
    record(is_send ? CommKind::send : CommKind::recv, nbytes(p.tensor), false);
    if (!is_send) p.tensor.bump_version();
  }
  return do_batch_send_recv(ops);
}

WorkPtr Communicator::do_batch_send_recv(const std::vector<P2POp>& ops) {
  std::vector<WorkPtr> works;
  works.reserve(ops.size());
  for (const P2POp& p : ops) {
    works.push_back(p.kind == P2POp::Kind::send ? do_send(p.tensor, p.peer, p.tag)
                                                : do_recv(p.tensor, p.peer, p.tag));
  }
  return std::make_shared<WorkList>(std::move(works));
}

WorkPtr Communicator::barrier() {
  record(CommKind::barrier, 0, false);
  return do_barrier();
}

}  // namespace tessera::parallel

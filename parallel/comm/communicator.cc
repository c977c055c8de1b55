// The backend-independent half of every communicator: argument checks with "[op] expected ..."
// messages, byte counters and the timeout setting.
#include "parallel/comm/communicator.h"

#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>

#include "core/error.h"
#include "core/profiler.h"

namespace tessera::parallel {
namespace {

// The largest tag MPI guarantees (MPI_TAG_UB is at least this); NCCL ignores tags.
constexpr int kMaxTag = 32767;

const char* device_type_name(DeviceType type) { return type == DeviceType::cpu ? "cpu" : "cuda"; }

void check_tensor(const char* op, const Tensor& t, const char* what, const Communicator& comm) {
  // `what` is "" or a role with a trailing space ("input ").
  TS_CHECK(t.defined(), op, "expected a defined ", what, "tensor, got an undefined one");
  TS_CHECK(comm.supports(t.device().type), op, "expected a ", device_type_name(comm.device_type()),
           " ", what, "tensor for this backend, got ", t.describe());
  TS_CHECK(t.is_contiguous(), op, "expected a contiguous ", what, "tensor, got ", t.describe(),
           " with strides ", shape_str(t.strides()));
}

// The same dtype, and the same device type (a RoutedCommunicator moves both over one backend).
void check_pair(const char* op, const Tensor& in, const Tensor& out) {
  TS_CHECK(in.dtype() == out.dtype(), op, "expected input and output of the same dtype, got ",
           in.describe(), " and ", out.describe());
  TS_CHECK(in.device().type == out.device().type, op,
           "expected input and output on the same device type, got ", in.describe(), " and ",
           out.describe());
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

namespace {

// The one copy of `name`, kept until the process ends: groups are made a few times per job, and
// their names are short.
const std::string* intern_name(std::string name) {
  static std::mutex* mutex = new std::mutex;
  static auto* names = new std::unordered_set<std::string>;  // nodes never move
  std::lock_guard<std::mutex> lock(*mutex);
  return &*names->insert(std::move(name)).first;
}

}  // namespace

Communicator::Communicator(std::string name)
    : name_(intern_name(std::move(name))),
      timeout_s_(default_comm_timeout_s()),
      owner_(std::this_thread::get_id()) {}

void Communicator::set_timeout_s(double seconds) {
  TS_CHECK(seconds > 0, "comm", "expected a positive timeout, got ", seconds, " s");
  timeout_s_ = seconds;
}

CommStats Communicator::owner_totals() const {
  CommStats totals;
  for (int k = 0; k < kNumCommKinds; ++k) {
    const OwnerCounter& o = owner_counts_[size_t(k)];
    CommCounter& c = totals.by_kind[size_t(k)];
    c.calls = o.calls.load(std::memory_order_relaxed);
    c.payload_bytes = o.payload_bytes.load(std::memory_order_relaxed);
    c.bytes_sent = o.bytes_sent.load(std::memory_order_relaxed);
    c.bytes_received = o.bytes_received.load(std::memory_order_relaxed);
  }
  return totals;
}

CommStats Communicator::stats() const {
  CommStats s = owner_totals();
  std::lock_guard<std::mutex> lock(stats_mutex_);
  for (int k = 0; k < kNumCommKinds; ++k) {
    CommCounter& c = s.by_kind[size_t(k)];
    const CommCounter &other = other_counts_.by_kind[size_t(k)],
                      &base = baseline_.by_kind[size_t(k)];
    c.calls += other.calls - base.calls;
    c.payload_bytes += other.payload_bytes - base.payload_bytes;
    c.bytes_sent += other.bytes_sent - base.bytes_sent;
    c.bytes_received += other.bytes_received - base.bytes_received;
  }
  return s;
}

void Communicator::reset_stats() {
  CommStats totals = owner_totals();
  std::lock_guard<std::mutex> lock(stats_mutex_);
  for (int k = 0; k < kNumCommKinds; ++k)
    totals.by_kind[size_t(k)] += other_counts_.by_kind[size_t(k)];
  baseline_ = totals;
}

void Communicator::record(CommKind kind, int64_t payload_bytes, bool is_root) {
  const Traffic traffic = collective_traffic(kind, payload_bytes, size(), is_root);
  if (std::this_thread::get_id() == owner_) {
    // Only this thread writes these: a load and a store each, no locked instruction.
    OwnerCounter& o = owner_counts_[size_t(kind)];
    const auto add = [](std::atomic<int64_t>& v, int64_t d) {
      v.store(v.load(std::memory_order_relaxed) + d, std::memory_order_relaxed);
    };
    add(o.calls, 1);
    add(o.payload_bytes, payload_bytes);
    add(o.bytes_sent, traffic.sent);
    add(o.bytes_received, traffic.received);
    return;
  }
  std::lock_guard<std::mutex> lock(stats_mutex_);
  CommCounter& c = other_counts_[kind];
  c.calls += 1;
  c.payload_bytes += payload_bytes;
  c.bytes_sent += traffic.sent;
  c.bytes_received += traffic.received;
}

namespace {

// Under the profiler (core/profiler.h) a collective is two events: its call (issuing it) and the
// wait for it, both with its payload bytes. Off, nothing is wrapped.
const char* wait_name(CommKind kind) {
  static const char* const names[] = {"wait all_reduce", "wait reduce_scatter", "wait all_gather",
                                      "wait broadcast",  "wait reduce",         "wait all_to_all",
                                      "wait send",       "wait recv",           "wait barrier"};
  static_assert(sizeof names / sizeof names[0] == kNumCommKinds);
  return names[size_t(kind)];
}

class ProfiledWork final : public Work {
 public:
  ProfiledWork(WorkPtr inner, CommKind kind, int64_t bytes)
      : inner_(std::move(inner)), kind_(kind), bytes_(bytes) {}
  void wait() override {
    TS_PROFILE(wait_name(kind_), "comm", bytes_);
    inner_->wait();
  }
  bool is_completed() override { return inner_->is_completed(); }

 private:
  WorkPtr inner_;
  CommKind kind_;
  int64_t bytes_;
};

WorkPtr profiled(WorkPtr work, CommKind kind, int64_t bytes) {
  if (!profiler::enabled() || !work) return work;
  return std::make_shared<ProfiledWork>(std::move(work), kind, bytes);
}

}  // namespace

WorkPtr Communicator::all_reduce(const Tensor& t, ReduceOp op) {
  check_tensor("all_reduce", t, "", *this);
  check_reduce_op("all_reduce", t, op);
  const int64_t bytes = nbytes(t);
  record(CommKind::all_reduce, bytes, false);
  t.bump_version();
  TS_PROFILE("all_reduce", "comm", bytes);
  return profiled(do_all_reduce(t, op), CommKind::all_reduce, bytes);
}

WorkPtr Communicator::reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op) {
  check_tensor("reduce_scatter", in, "input ", *this);
  check_tensor("reduce_scatter", out, "output ", *this);
  check_pair("reduce_scatter", in, out);
  check_reduce_op("reduce_scatter", in, op);
  TS_CHECK(in.numel() == out.numel() * size(), "reduce_scatter", "expected an input of group size ",
           size(), " x output numel ", out.numel(), " = ", out.numel() * size(),
           " elements, got input ", in.describe(), " and output ", out.describe());
  const int64_t bytes = nbytes(in);
  record(CommKind::reduce_scatter, bytes, false);
  out.bump_version();
  TS_PROFILE("reduce_scatter", "comm", bytes);
  return profiled(do_reduce_scatter(in, out, op), CommKind::reduce_scatter, bytes);
}

WorkPtr Communicator::all_gather(const Tensor& in, const Tensor& out) {
  check_tensor("all_gather", in, "input ", *this);
  check_tensor("all_gather", out, "output ", *this);
  check_pair("all_gather", in, out);
  TS_CHECK(out.numel() == in.numel() * size(), "all_gather", "expected an output of group size ",
           size(), " x input numel ", in.numel(), " = ", in.numel() * size(),
           " elements, got input ", in.describe(), " and output ", out.describe());
  const int64_t bytes = nbytes(out);
  record(CommKind::all_gather, bytes, false);
  out.bump_version();
  TS_PROFILE("all_gather", "comm", bytes);
  return profiled(do_all_gather(in, out), CommKind::all_gather, bytes);
}

WorkPtr Communicator::broadcast(const Tensor& t, int root) {
  check_tensor("broadcast", t, "", *this);
  check_rank("broadcast", "root", root, size());
  const int64_t bytes = nbytes(t);
  record(CommKind::broadcast, bytes, rank() == root);
  if (rank() != root) t.bump_version();
  TS_PROFILE("broadcast", "comm", bytes);
  return profiled(do_broadcast(t, root), CommKind::broadcast, bytes);
}

WorkPtr Communicator::reduce(const Tensor& t, int root, ReduceOp op) {
  check_tensor("reduce", t, "", *this);
  check_rank("reduce", "root", root, size());
  check_reduce_op("reduce", t, op);
  const int64_t bytes = nbytes(t);
  record(CommKind::reduce, bytes, rank() == root);
  if (rank() == root) t.bump_version();
  TS_PROFILE("reduce", "comm", bytes);
  return profiled(do_reduce(t, root, op), CommKind::reduce, bytes);
}

WorkPtr Communicator::all_to_all(const Tensor& in, const Tensor& out) {
  check_tensor("all_to_all", in, "input ", *this);
  check_tensor("all_to_all", out, "output ", *this);
  check_pair("all_to_all", in, out);
  TS_CHECK(in.numel() == out.numel() && in.numel() % size() == 0, "all_to_all",
           "expected input and output with the same numel, a multiple of group size ", size(),
           ", got input ", in.describe(), " and output ", out.describe());
  const int64_t bytes = nbytes(in);
  record(CommKind::all_to_all, bytes, false);
  out.bump_version();
  TS_PROFILE("all_to_all", "comm", bytes);
  return profiled(do_all_to_all(in, out), CommKind::all_to_all, bytes);
}

WorkPtr Communicator::send(const Tensor& t, int peer, int tag) {
  check_tensor("send", t, "", *this);
  check_rank("send", "peer", peer, size());
  check_tag("send", tag);
  const int64_t bytes = nbytes(t);
  record(CommKind::send, bytes, false);
  TS_PROFILE("send", "comm", bytes);
  return profiled(do_send(t, peer, tag), CommKind::send, bytes);
}

WorkPtr Communicator::recv(const Tensor& t, int peer, int tag) {
  check_tensor("recv", t, "", *this);
  check_rank("recv", "peer", peer, size());
  check_tag("recv", tag);
  const int64_t bytes = nbytes(t);
  record(CommKind::recv, bytes, false);
  t.bump_version();
  TS_PROFILE("recv", "comm", bytes);
  return profiled(do_recv(t, peer, tag), CommKind::recv, bytes);
}

WorkPtr Communicator::batch_send_recv(const std::vector<P2POp>& ops) {
  for (const P2POp& p : ops) {
    const char* op = p.kind == P2POp::Kind::send ? "send" : "recv";
    check_tensor(op, p.tensor, "", *this);
    check_rank(op, "peer", p.peer, size());
    check_tag(op, p.tag);
    // One backend moves a batch (a RoutedCommunicator picks it by the tensors' device type).
    TS_CHECK(p.tensor.device().type == ops.front().tensor.device().type, "batch_send_recv",
             "group '", name(), "': expected every transfer of a batch on one device type, got ",
             ops.front().tensor.describe(), " and ", p.tensor.describe());
  }
  for (const P2POp& p : ops) {
    bool is_send = p.kind == P2POp::Kind::send;
    record(is_send ? CommKind::send : CommKind::recv, nbytes(p.tensor), false);
    if (!is_send) p.tensor.bump_version();
  }
  int64_t bytes = 0;
  for (const P2POp& p : ops) bytes += nbytes(p.tensor);
  TS_PROFILE("send_recv", "comm", bytes);
  return profiled(do_batch_send_recv(ops), CommKind::send, bytes);
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
  TS_PROFILE("barrier", "comm");
  return profiled(do_barrier(), CommKind::barrier, 0);
}

}  // namespace tessera::parallel

#include "parallel/comm/comm_types.h"

#include <sstream>

namespace tessera::parallel {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::avg: return "avg";
    case ReduceOp::max: return "max";
    case ReduceOp::min: return "min";
    case ReduceOp::prod: return "prod";
  }
  return "?";
}

const char* comm_kind_name(CommKind kind) {
  switch (kind) {
    case CommKind::all_reduce: return "all_reduce";
    case CommKind::reduce_scatter: return "reduce_scatter";
    case CommKind::all_gather: return "all_gather";
    case CommKind::broadcast: return "broadcast";
    case CommKind::reduce: return "reduce";
    case CommKind::all_to_all: return "all_to_all";
    case CommKind::send: return "send";
    case CommKind::recv: return "recv";
    case CommKind::barrier: return "barrier";
  }
  return "?";
}

CommCounter& CommCounter::operator+=(const CommCounter& o) {
  calls += o.calls;
  payload_bytes += o.payload_bytes;
  bytes_sent += o.bytes_sent;
  bytes_received += o.bytes_received;
  return *this;
}

CommCounter CommStats::total() const {
  CommCounter sum;
  for (const CommCounter& c : by_kind) sum += c;
  return sum;
}

std::string CommStats::str() const {
  std::ostringstream os;
  for (int k = 0; k < kNumCommKinds; ++k) {
    const CommCounter& c = by_kind[size_t(k)];
    if (c.calls == 0) continue;
    os << comm_kind_name(CommKind(k)) << " calls=" << c.calls << " payload=" << c.payload_bytes
       << " sent=" << c.bytes_sent << " received=" << c.bytes_received << "\n";
  }
  return os.str();
}

Traffic collective_traffic(CommKind kind, int64_t n, int p, bool is_root) {
  if (p <= 1 && kind != CommKind::send && kind != CommKind::recv) return {};
  const int64_t share = n / p * (p - 1);  // n is a multiple of p where the collective needs it
  switch (kind) {
    case CommKind::all_reduce: {
      const int64_t moved = 2 * n * (p - 1) / p;
      return {moved, moved};
    }
    case CommKind::reduce_scatter:
    case CommKind::all_gather:
    case CommKind::all_to_all: return {share, share};
    case CommKind::broadcast: return is_root ? Traffic{n, 0} : Traffic{0, n};
    case CommKind::reduce: return is_root ? Traffic{0, n} : Traffic{n, 0};
    case CommKind::send: return {n, 0};
    case CommKind::recv: return {0, n};
    case CommKind::barrier: return {};
  }
  return {};
}

}  // namespace tessera::parallel

// Vocabulary shared by every communicator backend: reduction ops, collective kinds, and the
// per-kind counters of calls and bytes that make communication volume measurable.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace tessera::parallel {

enum class ReduceOp : uint8_t { sum, avg, max, min, prod };
const char* reduce_op_name(ReduceOp op);

enum class CommKind : uint8_t {
  all_reduce,
  reduce_scatter,
  all_gather,
  broadcast,
  reduce,
  all_to_all,
  send,
  recv,
  barrier,
};
inline constexpr int kNumCommKinds = 9;
const char* comm_kind_name(CommKind kind);

// Counters of one collective kind on one communicator. payload_bytes is the message size as
// nccl-tests define it (all_reduce, broadcast, reduce: the tensor; all_gather: the gathered output;
// reduce_scatter: the full input; all_to_all: the input; send/recv: the tensor). bytes_sent and
// bytes_received are what this rank moves under bandwidth-optimal (ring) algorithms, see
// collective_traffic().
struct CommCounter {
  int64_t calls = 0;
  int64_t payload_bytes = 0;
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;

  CommCounter& operator+=(const CommCounter& o);
};

struct CommStats {
  std::array<CommCounter, kNumCommKinds> by_kind{};

  const CommCounter& operator[](CommKind kind) const { return by_kind[size_t(kind)]; }
  CommCounter& operator[](CommKind kind) { return by_kind[size_t(kind)]; }
  CommCounter total() const;
  // One line per kind that was called: "all_reduce calls=3 payload=... sent=... received=...".
  std::string str() const;
};

// Bytes one rank sends and receives for one call.
struct Traffic {
  int64_t sent = 0;
  int64_t received = 0;
};

// The per-rank traffic of a collective on `group_size` ranks under bandwidth-optimal algorithms
// (what nccl-tests' bus bandwidth assumes), so counts do not depend on the backend's choice:
//   all_reduce        2 (p-1)/p n sent and received (reduce-scatter then all-gather)
//   reduce_scatter    (p-1)/p n, n the full input
//   all_gather        (p-1)/p n, n the gathered output
//   all_to_all        (p-1)/p n, n the input (the chunks that leave this rank)
//   broadcast         root sends n, every other rank receives n
//   reduce            every non-root rank sends n, the root receives n
//   send / recv       n sent / n received; barrier moves nothing
// Fractions round down; on one rank collectives move nothing.
Traffic collective_traffic(CommKind kind, int64_t payload_bytes, int group_size, bool is_root);

}  // namespace tessera::parallel

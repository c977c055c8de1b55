// `bench comm`'s collectives table: Tessera's call (the public Communicator API, started and waited
// for at once, as layers use it) against the plain MPI call of the same kind on the same raw f32
// buffers over a duplicate of the same group. Batches of the two alternate (which goes first
// alternates too), so a load spike on these shared cores hits both sides alike.
#include "tools/bench/comm_collectives.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/factory.h"
#include "tools/bench/table.h"

namespace tessera::bench {
namespace {

using parallel::Communicator;

enum class Kind { all_reduce, reduce_scatter, all_gather, broadcast, all_to_all, send_recv };

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::all_reduce: return "all_reduce";
    case Kind::reduce_scatter: return "reduce_scatter";
    case Kind::all_gather: return "all_gather";
    case Kind::broadcast: return "broadcast";
    case Kind::all_to_all: return "all_to_all";
    case Kind::send_recv: return "send/recv";
  }
  return "?";
}

// nccl-tests' bus bandwidth factor: what each rank's link carries relative to the message.
double bus_factor(Kind kind, int n) {
  switch (kind) {
    case Kind::all_reduce: return 2.0 * (n - 1) / n;
    case Kind::broadcast:
    case Kind::send_recv: return 1.0;
    default: return double(n - 1) / n;  // all_gather, reduce_scatter, all_to_all
  }
}

// The message of one row: `full` holds nccl-tests' size S (all_reduce's tensor, all_gather's
// output, reduce_scatter's and all_to_all's input), `part` its 1/n share, `out` all_to_all's
// output. Zeros, so repeated sums stay finite.
struct Buffers {
  Tensor full, part, out;
  int64_t numel = 0;
  int64_t part_numel = 0;
};

Buffers make_buffers(int64_t bytes, int n) {
  Buffers b;
  b.numel = std::max<int64_t>(n, (bytes / 4) / n * n);
  b.part_numel = b.numel / n;
  b.full = zeros({b.numel});
  b.part = zeros({b.part_numel});
  b.out = zeros({b.numel});
  return b;
}

// send/recv is a ping-pong between ranks 0 and 1 (one call = a round trip, reported per message);
// the other ranks sit it out.
std::function<void()> tessera_call(Communicator& comm, Kind kind, const Buffers& b) {
  switch (kind) {
    case Kind::all_reduce: return [&comm, t = b.full] { comm.all_reduce(t)->wait(); };
    case Kind::reduce_scatter:
      return [&comm, in = b.full, out = b.part] { comm.reduce_scatter(in, out)->wait(); };
    case Kind::all_gather:
      return [&comm, in = b.part, out = b.full] { comm.all_gather(in, out)->wait(); };
    case Kind::broadcast: return [&comm, t = b.full] { comm.broadcast(t, 0)->wait(); };
    case Kind::all_to_all:
      return [&comm, in = b.full, out = b.out] { comm.all_to_all(in, out)->wait(); };
    case Kind::send_recv:
      if (comm.rank() == 0) {
        return [&comm, t = b.full] {
          comm.send(t, 1)->wait();
          comm.recv(t, 1)->wait();
        };
      }
      if (comm.rank() == 1) {
        return [&comm, t = b.full] {
          comm.recv(t, 0)->wait();
          comm.send(t, 0)->wait();
        };
      }
      return [] {};
  }
  return [] {};
}

void mpi_check(int rc, const char* call) {
  TS_CHECK(rc == MPI_SUCCESS, "bench comm", "expected ", call, " to succeed, got error ", rc);
}

std::function<void()> mpi_call(MPI_Comm comm, int rank, Kind kind, const Buffers& b) {
  float* full = b.full.data<float>();
  float* part = b.part.data<float>();
  float* out = b.out.data<float>();
  const int numel = int(b.numel), share = int(b.part_numel);
  switch (kind) {
    case Kind::all_reduce:
      return [=] {
        mpi_check(MPI_Allreduce(MPI_IN_PLACE, full, numel, MPI_FLOAT, MPI_SUM, comm),
                  "MPI_Allreduce");
      };
    case Kind::reduce_scatter:
      return [=] {
        mpi_check(MPI_Reduce_scatter_block(full, part, share, MPI_FLOAT, MPI_SUM, comm),
                  "MPI_Reduce_scatter_block");
      };
    case Kind::all_gather:
      return [=] {
        mpi_check(MPI_Allgather(part, share, MPI_FLOAT, full, share, MPI_FLOAT, comm),
                  "MPI_Allgather");
      };
    case Kind::broadcast:
      return [=] { mpi_check(MPI_Bcast(full, numel, MPI_FLOAT, 0, comm), "MPI_Bcast"); };
    case Kind::all_to_all:
      return [=] {
        mpi_check(MPI_Alltoall(full, share, MPI_FLOAT, out, share, MPI_FLOAT, comm),
                  "MPI_Alltoall");
      };
    case Kind::send_recv:
      if (rank > 1) return [] {};
      return [=] {
        const int peer = 1 - rank;
        if (rank == 0) mpi_check(MPI_Send(full, numel, MPI_FLOAT, peer, 0, comm), "MPI_Send");
        mpi_check(MPI_Recv(full, numel, MPI_FLOAT, peer, 0, comm, MPI_STATUS_IGNORE), "MPI_Recv");
        if (rank == 1) mpi_check(MPI_Send(full, numel, MPI_FLOAT, peer, 0, comm), "MPI_Send");
      };
  }
  return [] {};
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Seconds per call over one batch of `calls` calls started together after a barrier: the slowest
// rank's (a collective is done when its last rank is).
double time_batch(MPI_Comm comm, const std::function<void()>& call, int calls) {
  mpi_check(MPI_Barrier(comm), "MPI_Barrier");
  const double start = now_s();
  for (int i = 0; i < calls; ++i) call();
  double per_call = (now_s() - start) / calls;
  mpi_check(MPI_Allreduce(MPI_IN_PLACE, &per_call, 1, MPI_DOUBLE, MPI_MAX, comm), "MPI_Allreduce");
  return per_call;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t mid = v.size() / 2;
  return v.size() % 2 == 1 ? v[mid] : 0.5 * (v[mid - 1] + v[mid]);
}

struct RowTimes {
  double tessera_s = 0;
  double mpi_s = 0;
};

// One warm-up batch per side, then `rounds` timed batches per side, alternating.
RowTimes time_row(Communicator& comm, MPI_Comm mpi_comm, Kind kind, const Buffers& b, int rounds) {
  const std::function<void()> ours = tessera_call(comm, kind, b);
  const std::function<void()> plain = mpi_call(mpi_comm, comm.rank(), kind, b);
  const int64_t bytes = b.numel * 4;
  // About 16 MB of traffic per batch, 1 to 500 calls.
  const int calls = int(std::clamp<int64_t>((int64_t(16) << 20) / bytes, 1, 500));
  time_batch(mpi_comm, ours, calls);
  time_batch(mpi_comm, plain, calls);
  std::vector<double> ours_s, plain_s;
  for (int r = 0; r < rounds; ++r) {
    if (r % 2 == 0) {
      ours_s.push_back(time_batch(mpi_comm, ours, calls));
      plain_s.push_back(time_batch(mpi_comm, plain, calls));
    } else {
      plain_s.push_back(time_batch(mpi_comm, plain, calls));
      ours_s.push_back(time_batch(mpi_comm, ours, calls));
    }
  }
  const double per_message = kind == Kind::send_recv ? 0.5 : 1.0;  // a round trip is 2 messages
  return {median(ours_s) * per_message, median(plain_s) * per_message};
}

}  // namespace

std::string human_bytes(int64_t b) {
  for (const auto& [unit, name] : {std::pair<int64_t, const char*>{int64_t(1) << 20, " MB"},
                                   std::pair<int64_t, const char*>{int64_t(1) << 10, " KB"}}) {
    if (b < unit) continue;
    return (b % unit == 0 ? std::to_string(b / unit) : format_number(double(b) / unit, 1)) + name;
  }
  return str_cat(b, " B");
}

void bench_collectives(Communicator& world, const CollectiveBenchOptions& options) {
  TS_CHECK(std::string(world.backend()) == "mpi", "bench comm",
           "expected a communicator of the MPI backend, got ", world.backend());
  const int n = world.size();
  // The peer's communicator: the same ranks, duplicated as Tessera duplicates its own, so both
  // sides get the same collective algorithms and neither's traffic can match the other's.
  MPI_Comm mpi_comm = MPI_COMM_NULL;
  mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &mpi_comm), "MPI_Comm_dup");
  int mpi_size = 0;
  mpi_check(MPI_Comm_size(mpi_comm, &mpi_size), "MPI_Comm_size");
  TS_CHECK(mpi_size == n, "bench comm", "expected the world communicator (", mpi_size,
           " ranks), got a group of ", n);

  std::vector<Kind> kinds{Kind::all_reduce, Kind::reduce_scatter, Kind::all_gather,
                          Kind::broadcast, Kind::all_to_all};
  if (n > 1) kinds.push_back(Kind::send_recv);
  Table table({"collective", "size", "time (us)", "MPI time (us)", "ratio", "algbw (GB/s)",
               "busbw (GB/s)", "MPI busbw (GB/s)"});
  for (size_t c = 1; c < 8; ++c) table.align_right(c);
  for (Kind kind : kinds) {
    for (int64_t size = options.min_bytes; size <= options.max_bytes; size *= 4) {
      const Buffers b = make_buffers(size, n);
      const int64_t bytes = b.numel * 4;  // what moves, for the size column and algbw
      const RowTimes t = time_row(world, mpi_comm, kind, b, options.rounds);
      const double algbw = double(bytes) / t.tessera_s / 1e9;
      const double mpi_algbw = double(bytes) / t.mpi_s / 1e9;
      table.add_row({kind_name(kind), human_bytes(bytes), format_number(t.tessera_s * 1e6, 1),
                     format_number(t.mpi_s * 1e6, 1), format_number(t.tessera_s / t.mpi_s, 2),
                     format_number(algbw, 2), format_number(algbw * bus_factor(kind, n), 2),
                     format_number(mpi_algbw * bus_factor(kind, n), 2)});
    }
  }
  MPI_Comm_free(&mpi_comm);
  if (world.rank() == 0) {
    std::printf(
        "\n## Collectives, Tessera (MPI backend) beside the plain MPI call (MPI_Allreduce, "
        "MPI_Reduce_scatter_block, MPI_Allgather, MPI_Bcast, MPI_Alltoall, MPI_Send/MPI_Recv) on "
        "the same f32 buffers, %d ranks. Time per call: the slowest rank's, median of %d batches "
        "per side after one warm-up batch, batches of the two sides alternating; send/recv is a "
        "ping-pong between ranks 0 and 1, per message. ratio = time / MPI time. algbw = size / "
        "time; busbw = algbw x 2(n-1)/n for all_reduce, (n-1)/n for reduce_scatter, all_gather "
        "and all_to_all, 1 for broadcast and send/recv (nccl-tests); 1 MB = 2^20 bytes.\n\n%s\n",
        n, options.rounds, table.render().c_str());
  }
}

}  // namespace tessera::bench

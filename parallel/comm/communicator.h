// The Communicator interface: a group of ranks (rank, size, split) with asynchronous collectives
// and point-to-point transfers over a backend (MPI for CPU tensors, NCCL for CUDA tensors).
// Validation and byte counting happen here, once, for every backend.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/tensor.h"
#include "parallel/comm/comm_types.h"

namespace tessera::parallel {

// A started operation. wait() blocks until it is done (and its result is in the caller's tensors);
// a wait that exceeds the communicator's timeout ends the whole job (see Communicator::timeout_s).
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
  virtual bool is_completed() = 0;
};
using WorkPtr = std::shared_ptr<Work>;

// Waits for several works as one (batched send/recv).
class WorkList : public Work {
 public:
  explicit WorkList(std::vector<WorkPtr> works) : works_(std::move(works)) {}
  void wait() override;
  bool is_completed() override;

 private:
  std::vector<WorkPtr> works_;
};

// One transfer of a batch: send `tensor` to `peer`, or receive into it from `peer`.
struct P2POp {
  enum class Kind : uint8_t { send, recv };
  Kind kind = Kind::send;
  Tensor tensor;
  int peer = 0;
  int tag = 0;
};

// Collectives run on the group's ranks; every rank of the group must call them in the same order
// with matching shapes and dtypes. Tensors must be contiguous, on the backend's device type, and
// the inputs of reduce_scatter / all_gather / all_to_all must not overlap their outputs. Writes
// happen in place: a tensor handed to an unfinished Work must not be read or written until wait().
class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The group's name in messages ("world", "data", "2d_row", ...). Interned: the string lives as
  // long as the process, so a work or a timeout message may view it after this communicator is
  // gone.
  const std::string& name() const { return *name_; }
  // "mpi" or "nccl".
  virtual const char* backend() const = 0;
  // The device type whose tensors this backend moves.
  virtual DeviceType device_type() const = 0;
  // The device this rank's tensors must be on (the CPU for MPI; the communicator's GPU for NCCL).
  virtual Device device() const { return Device{device_type(), 0}; }
  // Whether tensors of `type` can go through this communicator: device_type() for one backend;
  // both for a RoutedCommunicator, which sends each tensor over the backend of its device.
  virtual bool supports(DeviceType type) const { return type == device_type(); }

  // t = op over ranks of t. avg needs a floating dtype. On bool tensors sum and max are a
  // logical or, min and prod a logical and.
  WorkPtr all_reduce(const Tensor& t, ReduceOp op = ReduceOp::sum);
  // out (n) = the rank-th chunk of op over ranks of in (size * n).
  WorkPtr reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op = ReduceOp::sum);
  // out (size * n) = concatenation of every rank's in (n), in rank order.
  WorkPtr all_gather(const Tensor& in, const Tensor& out);
  // t on every rank = t on root.
  WorkPtr broadcast(const Tensor& t, int root);
  // t on root = op over ranks of t; other ranks' t is left unchanged.
  WorkPtr reduce(const Tensor& t, int root, ReduceOp op = ReduceOp::sum);
  // Chunk j (of size chunks) of in goes to rank j; chunk i of out comes from rank i.
  WorkPtr all_to_all(const Tensor& in, const Tensor& out);
  // Point to point; a recv matches the send from `peer` with the same tag, in order.
  WorkPtr send(const Tensor& t, int peer, int tag = 0);
  WorkPtr recv(const Tensor& t, int peer, int tag = 0);
  // Starts every transfer of `ops` together (pipeline stages exchange activations and gradients
  // this way without ordering deadlocks); one Work waits for all of them.
  WorkPtr batch_send_recv(const std::vector<P2POp>& ops);
  WorkPtr barrier();
  // Collective over this group: ranks with the same color form a new group, ordered by key (then by
  // rank). A negative color joins no group and gets nullptr. `name` defaults to
  // "<this name>/<color>".
  virtual std::shared_ptr<Communicator> split(int color, int key, const std::string& name = "") = 0;

  // Counters since construction or reset_stats().
  CommStats stats() const;
  void reset_stats();
  // Seconds a wait() may block before the job is aborted.
  double timeout_s() const { return timeout_s_; }
  void set_timeout_s(double seconds);

 protected:
  explicit Communicator(std::string name);
  // It forwards each checked call to the do_* of the backend for the call's tensors.
  friend class RoutedCommunicator;

  // Backends implement these on arguments that are already checked.
  virtual WorkPtr do_all_reduce(const Tensor& t, ReduceOp op) = 0;
  virtual WorkPtr do_reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op) = 0;
  virtual WorkPtr do_all_gather(const Tensor& in, const Tensor& out) = 0;
  virtual WorkPtr do_broadcast(const Tensor& t, int root) = 0;
  virtual WorkPtr do_reduce(const Tensor& t, int root, ReduceOp op) = 0;
  virtual WorkPtr do_all_to_all(const Tensor& in, const Tensor& out) = 0;
  virtual WorkPtr do_send(const Tensor& t, int peer, int tag) = 0;
  virtual WorkPtr do_recv(const Tensor& t, int peer, int tag) = 0;
  // Default: each transfer started on its own. NCCL overrides it to group them.
  virtual WorkPtr do_batch_send_recv(const std::vector<P2POp>& ops);
  virtual WorkPtr do_barrier() = 0;

 private:
  void record(CommKind kind, int64_t payload_bytes, bool is_root);

  const std::string* name_;  // interned
  double timeout_s_;
  // The counters. Calls come from the thread that made the communicator, nearly always, and that
  // thread counts into its own counters with plain loads and stores: a lock's atomic instruction
  // cost about 6 ns here, a sixth of all that a small blocking call adds to MPI's own time. Other
  // threads (ZeRO's step worker) add theirs under the mutex, and a reset moves the baseline
  // instead of clearing counters another thread is writing.
  struct OwnerCounter {
    std::atomic<int64_t> calls{0}, payload_bytes{0}, bytes_sent{0}, bytes_received{0};
  };
  CommStats owner_totals() const;
  std::thread::id owner_;
  std::array<OwnerCounter, kNumCommKinds> owner_counts_;
  mutable std::mutex stats_mutex_;  // guards the two below
  CommStats other_counts_;          // every other thread's calls
  CommStats baseline_;              // the totals at the last reset_stats()
};

// TESSERA_COMM_TIMEOUT_S when set (a positive number of seconds), else 300.
double default_comm_timeout_s();

}  // namespace tessera::parallel

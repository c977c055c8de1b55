// DataParallel: PyTorch-DDP-style data parallelism over a data-parallel communicator. Parameters
// are broadcast from rank 0 at construction; in backward, gradients are copied into flat buckets
// and each bucket's average all-reduce starts from the grad-ready hooks as soon as its last
// gradient arrives, while backward goes on; finish_gradient_sync() waits and writes the averages
// back into every parameter's .grad().
//
// Usage, one optimizer step with k accumulation micro-steps:
//   for (int i = 0; i < k - 1; ++i) { auto guard = dp.no_sync(); backward(loss_i); }
//   backward(loss_last);        // buckets start reducing during this backward
//   dp.finish_gradient_sync();  // .grad() of every parameter = average over ranks
//   optimizer.step();
// finish_gradient_sync() is an explicit call because the autograd engine has no end-of-backward
// callback to run it from (PyTorch's queue_callback); with one it could run automatically.
//
// MPI progress: Open MPI progresses nonblocking collectives only inside MPI calls, and backward
// makes none. Every grad-ready hook therefore tests (MPI_Test) each bucket already in flight, so a
// bucket's all-reduce advances each time a later gradient arrives, and finish_gradient_sync() waits
// for the rest. We chose this over a communication thread: it needs no MPI_THREAD_MULTIPLE, takes
// no core from the compute threads (ranks often share cores) and is deterministic.
//
// Parameters without a gradient (unused in this backward, or used on some ranks only): their hook
// never fires, so their bucket cannot start during backward; finish_gradient_sync() fills their
// slot with their current .grad() (for example what no_sync micro-steps accumulated) or zeros, and
// reduces it like any other. Every parameter that requires grad thus ends the step with a defined
// average gradient, as with DDP's find_unused_parameters=True; no graph search is needed because
// buckets always start in plan order on every rank (a bucket waits for the ones before it), so
// ranks whose gradients arrive in different orders still issue the same collectives in the same
// order.
//
// Memory: the buckets hold one extra copy of the gradients (DDP's default; gradients as views into
// the buckets would save it but breaks whenever an optimizer sets .grad() to none).
//
// The layering keeps parallel/ below models/: pass module.named_parameters().
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "parallel/comm/communicator.h"
#include "parallel/data/grad_bucket.h"

namespace tessera::parallel {

namespace detail {
struct DataParallelState;
}

struct DataParallelOptions {
  // Bytes of gradient per bucket (PyTorch DDP's default bucket_cap_mb = 25).
  int64_t bucket_cap_bytes = 25 * 1024 * 1024;
  // Copy rank 0's parameters to every rank at construction.
  bool broadcast_parameters = true;
  // Keep a log of sync events (see events()); off by default, for tests and profiling.
  bool record_events = false;
  // Parameters whose gradient is completed after backward, by the caller (a pipeline's tied
  // embedding, summed between the first and the last stage once both have run their backwards).
  // Their grad-ready hooks start nothing; they sit in buckets of their own, planned after all the
  // others, which finish_gradient_sync() fills from their .grad() of that moment. So every other
  // bucket still starts during backward, and these reduce the caller's completed gradient.
  std::vector<std::string> completed_after_backward;
  // Sets of parameters whose gradients become final at different times within one accumulation (a
  // pipeline rank's model chunks under the interleaved schedule: each chunk has its own last
  // backward). Each set gets buckets of its own, and sync_group(g), called under no_sync() just
  // before set g's last backward, lets that set's hooks start its buckets while the other sets
  // keep accumulating, so each chunk's reduction overlaps with the backward of the chunks still
  // computing (Megatron's overlap for virtual pipeline stages). A parameter in no set, or also in
  // completed_after_backward, is planned as without this option.
  std::vector<std::vector<std::string>> sync_groups;
};

// One event of a synced backward: a parameter's gradient arrived (index: the parameter's position
// in params()), or a bucket's all-reduce was started or found complete (index: the bucket).
struct SyncEvent {
  enum class Kind : uint8_t { grad_ready, bucket_started, bucket_completed };
  Kind kind = Kind::grad_ready;
  int64_t index = 0;
};

class DataParallel {
 public:
  using NamedParams = std::vector<std::pair<std::string, Tensor>>;

  // Collective over `comm`: checks that every rank passes the same parameter names, shapes and
  // dtypes and the same options, broadcasts from rank 0, plans the buckets and registers a
  // grad-ready hook on every parameter that requires grad (parameters that do not are broadcast
  // but never reduced). The hooks stay on the tensors after this object is gone and then do
  // nothing.
  DataParallel(NamedParams params, std::shared_ptr<Communicator> comm,
               const DataParallelOptions& options = {});
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  // While alive, gradients only accumulate locally in .grad(): hooks start nothing and
  // finish_gradient_sync() does nothing. The next synced backward reduces the accumulated sums.
  class NoSyncGuard {
   public:
    NoSyncGuard(NoSyncGuard&& other) noexcept;
    NoSyncGuard& operator=(NoSyncGuard&&) = delete;
    ~NoSyncGuard();

   private:
    friend class DataParallel;
    NoSyncGuard(std::shared_ptr<detail::DataParallelState> state, bool previous);
    std::shared_ptr<detail::DataParallelState> state_;
    bool previous_ = false;
  };
  // Throws if a synced backward has started reducing and finish_gradient_sync() was not called.
  [[nodiscard]] NoSyncGuard no_sync();
  bool sync_enabled() const;
  // Under no_sync(): from now until finish_gradient_sync(), the hooks of options.sync_groups[g]
  // reduce as in a synced backward (the set's next gradients are its final ones). End no_sync()
  // before finish_gradient_sync(), which then completes the step as after a synced backward.
  void sync_group(size_t g);

  // Collective: starts every bucket not started yet (filling gradients that never arrived, see the
  // top of this file), waits for all and writes the averages into each parameter's .grad()
  // (copied into an existing gradient, else a new tensor). Call once after each synced backward.
  void finish_gradient_sync();

  const std::shared_ptr<Communicator>& comm() const;
  // The parameters as given (after the broadcast they hold rank 0's values).
  const NamedParams& params() const;
  size_t num_buckets() const;
  // The names of bucket b's parameters, in reduction order.
  std::vector<std::string> bucket_param_names(size_t b) const;
  int64_t bucket_bytes(size_t b) const;
  // Events since construction or clear_events() (empty unless options.record_events).
  std::vector<SyncEvent> events() const;
  void clear_events();

 private:
  std::shared_ptr<detail::DataParallelState> state_;
};

}  // namespace tessera::parallel

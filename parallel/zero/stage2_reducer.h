// Stage 2's gradient reducer (see "Stage 2" in sharded_optimizer.h): the per-step state driven by
// the grad-ready hooks, private to ShardedOptimizer.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "parallel/comm/communicator.h"
#include "parallel/zero/host_mover.h"
#include "parallel/zero/zero_plan.h"

namespace tessera::parallel::zero::detail {

struct Stage2Reducer {
  // The shard gradients accumulate on `shard_device`: the communicator's device, or the host under
  // offload (mover->host()), so a reduced range leaves the device as soon as its bucket
  // completes: on a GPU into pinned memory, on the mover's copy stream.
  Stage2Reducer(std::shared_ptr<Communicator> comm, const ZeroPlan& plan,
                std::vector<Tensor> params, std::vector<std::string> names,
                std::vector<DType> group_dtypes, int64_t cap_bytes, Device shard_device,
                std::shared_ptr<HostMover> mover);

  // The hook body: parameter p's gradient arrived (ignored under no_sync).
  void on_grad_ready(size_t p);
  // Starts what has not started (gradients that never arrived count as their .grad() or zeros),
  // waits for all; returns each group's shard gradient (f32 on the shard device, zero padding).
  // Leaves every model parameter without a gradient. Under offload on a GPU every step returns the
  // same pinned buffers: the next synced backward overwrites them.
  std::vector<Tensor> finish();

  std::shared_ptr<Communicator> comm;
  // When set: called as each reduced range of this rank's shard is final, with its group, its
  // offset in the group's shard and its averaged gradient (f32, a view into the shard gradient
  // finish() returns), in the order the buckets complete. The gradient may be read once `ready`
  // is (its move to the host may still run).
  std::function<void(size_t group, int64_t shard_offset, const Tensor& grad,
                     const MoveReady& ready)>
      on_shard_ready;
  bool no_sync = false;
  bool step_active = false;  // a gradient arrived since the last finish()

 private:
  void reset_step();
  const Tensor& buffer(size_t b);
  Tensor slot_view(size_t p);
  void fill(size_t p, const Tensor& grad);
  void launch_ready();
  void progress();
  void complete(size_t b);
  void allocate_shard_grads();

  std::vector<Tensor> params_;
  std::vector<std::string> names_;
  std::vector<ReduceBucket> buckets_;
  std::vector<DType> group_dtypes_;
  std::vector<int64_t> shard_numel_;  // per group
  std::vector<int64_t> offset_;       // per parameter: its flat offset in its group
  std::vector<int64_t> bucket_of_;    // per parameter; -1 for empty ones
  int rank_ = 0;
  Device shard_device_;
  std::shared_ptr<HostMover> mover_;

  // One synced step.
  std::vector<bool> ready_;
  std::vector<int64_t> pending_;  // per bucket: parameters still to arrive
  std::vector<Tensor> buffers_;   // per bucket, from its first gradient until it is complete
  std::vector<std::vector<WorkPtr>> works_;  // per bucket: one reduce per part
  std::vector<bool> done_;
  size_t next_launch_ = 0;
  std::vector<Tensor> shard_grads_;
};

}  // namespace tessera::parallel::zero::detail

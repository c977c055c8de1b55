// How ZeRO's gradients reach their shards, behind one interface: an all-reduce of every gradient
// (stage 1, DataParallel's buckets and hooks) after which each rank keeps its shard's slice, or a
// reduce of each bucket to the ranks that own it (stages 2 and 3, stage2_reducer.h). As Megatron
// keeps reduction in its data-parallel gradient buffers, the optimizer never sees how.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "core/tensor.h"
#include "parallel/zero/host_mover.h"
#include "parallel/zero/zero_layout.h"

namespace tessera::parallel::zero {

class GradReduction {
 public:
  // While alive, backward only accumulates gradients locally in .grad(); the next synced backward
  // reduces the sums.
  class Pause {
   public:
    virtual ~Pause() = default;
  };
  // Called as each reduced range of this rank's shard is final: its group, its offset in the
  // group's shard and its averaged gradient (f32, a view into what finish() returns), readable
  // once `ready` is.
  using RangeReady = std::function<void(size_t group, int64_t shard_offset, const Tensor& grad,
                                        const MoveReady& ready)>;

  virtual ~GradReduction() = default;
  [[nodiscard]] virtual std::unique_ptr<Pause> pause() = 0;
  // Collective after the synced backward: each group's shard gradient (f32 on the layout's shard
  // device, zero padding) with the model's parameters left without gradients; nullopt when the
  // backward did not sync (a Pause was alive).
  virtual std::optional<std::vector<Tensor>> finish() = 0;
  // Whether on_range_ready can deliver ranges during backward (the overlapped step needs it).
  virtual bool reduces_by_range() const = 0;
  // Installs (or, with an empty function, removes) the range hook; only when reduces_by_range().
  virtual void on_range_ready(RangeReady hook) = 0;
};

// Stage 1: DataParallel all-reduces the gradients (and, with broadcast_parameters, broadcasts
// rank 0's parameters now).
std::unique_ptr<GradReduction> make_all_reduce(std::shared_ptr<const ZeroLayout> layout,
                                               int64_t bucket_cap_bytes, bool broadcast_parameters);
// Stages 2 and 3: buckets reduced to their owners from the grad-ready hooks.
std::unique_ptr<GradReduction> make_reduce_to_owner(std::shared_ptr<const ZeroLayout> layout,
                                                    int64_t bucket_cap_bytes);

}  // namespace tessera::parallel::zero

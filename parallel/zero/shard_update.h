// The update of this rank's shards: the f32 master shard of every group, a plain optimizer over
// them (one parameter per group), and their rounding into the parameters' dtype for the parameter
// sync. Under offload the masters and the optimizer state live on the host (the layout's shard
// device). OverlappedShardUpdate steps each reduced range on a worker thread during backward
// instead of the whole shards after it ("Overlapped step" in sharded_optimizer.h).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "optim/optimizer.h"
#include "parallel/zero/grad_reduction.h"
#include "parallel/zero/step_worker.h"
#include "parallel/zero/zero_layout.h"

namespace tessera::parallel::zero {

class ShardUpdate {
 public:
  // masters[g]: this rank's f32 master shard of group g, (shard_numel) on the shard device;
  // groups: the optimizer's groups over the model's parameters (their lr / weight_decay).
  ShardUpdate(std::shared_ptr<const ZeroLayout> layout, std::vector<Tensor> masters,
              const std::vector<optim::ParamGroup>& groups, const nlohmann::json& optimizer);
  virtual ~ShardUpdate() = default;
  ShardUpdate(const ShardUpdate&) = delete;
  ShardUpdate& operator=(const ShardUpdate&) = delete;

  // The reduced shard gradients of a synced backward (f32, on the shard device).
  virtual void take_gradients(const std::vector<Tensor>& grads);
  // The optimizer step over the shards, unless take_gradients() took it already.
  virtual void step();
  // take_gradients() stepped the shards: nothing may change their gradients any more.
  virtual bool stepped() const { return false; }

  const std::vector<Tensor>& shards() const { return shards_; }
  optim::Optimizer& optimizer() { return *optimizer_; }
  const optim::Optimizer& optimizer() const { return *optimizer_; }
  // Group g's master shard in the parameters' dtype on the communicator's device (ParamSync's
  // ComputeShard): the shard itself when it is both already, else a rounded copy. `chunked`: left
  // on the host when the master is there (stage 3's chunks move it piece by piece).
  Tensor compute_shard(size_t g, bool chunked) const;

 protected:
  std::shared_ptr<const ZeroLayout> layout_;
  std::vector<Tensor> shards_;
  std::unique_ptr<optim::Optimizer> optimizer_;

 private:
  // Under offload on a GPU: per group, the pinned host buffer the rounded shard leaves from, and
  // its last move out.
  mutable std::vector<Tensor> staging_;
  mutable std::vector<MoveReady> staged_;
};

class OverlappedShardUpdate : public ShardUpdate {
 public:
  // `reduction` must deliver ranges (reduces_by_range()) and outlive this object.
  OverlappedShardUpdate(std::shared_ptr<const ZeroLayout> layout, std::vector<Tensor> masters,
                        const std::vector<optim::ParamGroup>& groups,
                        const nlohmann::json& optimizer, GradReduction& reduction);
  ~OverlappedShardUpdate() override;

  // Steps what no reduced range covered (the padding) and waits for the worker.
  void take_gradients(const std::vector<Tensor>& grads) override;
  void step() override;
  bool stepped() const override { return stepped_; }

 private:
  // The update of the reduced range [offset, offset + grad.numel()) of group g's shard goes to
  // the worker; the step's first range begins it.
  void step_range(size_t g, int64_t offset, const Tensor& grad, const MoveReady& ready);
  void begin_step();

  GradReduction& reduction_;
  StepWorker worker_;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> posted_;  // (offset, numel) per group
  bool overlapping_ = false;  // a step's ranges are being posted
  bool stepped_ = false;      // take_gradients() took the step
};

}  // namespace tessera::parallel::zero

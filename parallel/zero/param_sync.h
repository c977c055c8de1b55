// How the model's parameters follow the updated master shards, behind one interface: an
// all-gather of every group's updated shard into the parameters (stages 1 and 2), or stage 3's
// released parameters, gathered on use from compute shards that the update rounds the masters
// into (stage3_params.h). As Megatron's distributed optimizer steps its shards and gathers.
#pragma once

#include <functional>
#include <memory>

#include "core/tensor.h"
#include "parallel/zero/stage3_params.h"
#include "parallel/zero/zero_layout.h"

namespace tessera::parallel::zero {

class ParamSync {
 public:
  // Group g's updated master shard in the parameters' dtype (layout.group_dtypes[g]); `chunked`:
  // it may stay where the master is (on the host), the receiver moves it chunk by chunk.
  using ComputeShard = std::function<Tensor(size_t g, bool chunked)>;

  virtual ~ParamSync() = default;
  // The step's forward and backward are over and the gradients reduced (collective).
  virtual void backward_done() = 0;
  // Collective: the parameters = the updated masters, rounded to their dtype.
  virtual void publish(const ComputeShard& shard) = 0;
  // Stage 3's parameter manager; null where parameters are never released.
  virtual Stage3Params* stage3() = 0;
};

// Stages 1 and 2: every parameter is whole on every rank; publish() all-gathers each group.
std::unique_ptr<ParamSync> make_all_gather_sync(std::shared_ptr<const ZeroLayout> layout);
// Stage 3: the parameters are released now and gathered on use (from `shard`'s compute shards).
std::unique_ptr<ParamSync> make_gather_on_use_sync(std::shared_ptr<const ZeroLayout> layout,
                                                   const ParamSync::ComputeShard& shard,
                                                   const Stage3Options& options);

}  // namespace tessera::parallel::zero

// Stage 3's parameter sync: the parameters are released and gathered on use (stage3_params.h);
// publishing rounds the updated masters into the compute shards, with no gather (param_sync.h).
#include <utility>
#include <vector>

#include "autograd/grad_mode.h"
#include "parallel/zero/param_sync.h"

namespace tessera::parallel::zero {

namespace {

std::vector<Tensor> all_shards(const ZeroLayout& layout, const ParamSync::ComputeShard& shard,
                               bool chunked) {
  std::vector<Tensor> out;
  for (size_t g = 0; g < layout.groups(); ++g) out.push_back(shard(g, chunked));
  return out;
}

class GatherOnUseSync : public ParamSync {
 public:
  GatherOnUseSync(std::shared_ptr<const ZeroLayout> layout, const ComputeShard& shard,
                  const Stage3Options& options)
      : layout_(std::move(layout)),
        params_(layout_->comm, layout_->plan, layout_->params, layout_->names,
                all_shards(*layout_, shard, /*chunked=*/false), options) {}

  // Nothing needs a gathered parameter until the next forward.
  void backward_done() override { params_.end_window(true); }

  void publish(const ComputeShard& shard) override {
    autograd::NoGradGuard no_grad;
    params_.update(all_shards(*layout_, shard, params_.chunked()));
  }

  Stage3Params* stage3() override { return &params_; }

 private:
  std::shared_ptr<const ZeroLayout> layout_;
  Stage3Params params_;
};

}  // namespace

std::unique_ptr<ParamSync> make_gather_on_use_sync(std::shared_ptr<const ZeroLayout> layout,
                                                   const ParamSync::ComputeShard& shard,
                                                   const Stage3Options& options) {
  return std::make_unique<GatherOnUseSync>(std::move(layout), shard, options);
}

}  // namespace tessera::parallel::zero

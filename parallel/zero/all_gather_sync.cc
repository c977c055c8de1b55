// Stages 1 and 2's parameter sync: every group's updated shard all-gathered into the model's
// parameters, one group at a time (param_sync.h).
#include <utility>

#include "autograd/grad_mode.h"
#include "core/factory.h"
#include "parallel/zero/param_sync.h"

namespace tessera::parallel::zero {

namespace {

class AllGatherSync : public ParamSync {
 public:
  explicit AllGatherSync(std::shared_ptr<const ZeroLayout> layout) : layout_(std::move(layout)) {}

  void backward_done() override {}

  void publish(const ComputeShard& shard) override {
    autograd::NoGradGuard no_grad;
    const ZeroLayout& l = *layout_;
    for (size_t g = 0; g < l.groups(); ++g) {
      const ZeroGroupPlan& gp = l.plan.groups[g];
      if (gp.slots.empty()) continue;
      const Tensor mine = shard(g, /*chunked=*/false);
      Tensor all =
          empty({gp.padded_numel()}, {.dtype = l.group_dtypes[g], .device = l.comm->device()});
      l.comm->all_gather(mine, all)->wait();
      for (const FlatSlot& s : gp.slots)
        l.params[s.param].reshape({s.numel}).copy_(all.narrow(0, s.offset, s.numel));
    }
  }

  Stage3Params* stage3() override { return nullptr; }

 private:
  std::shared_ptr<const ZeroLayout> layout_;
};

}  // namespace

std::unique_ptr<ParamSync> make_all_gather_sync(std::shared_ptr<const ZeroLayout> layout) {
  return std::make_unique<AllGatherSync>(std::move(layout));
}

}  // namespace tessera::parallel::zero

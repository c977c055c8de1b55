// Stage 1's gradient reduction: DataParallel all-reduces every gradient during backward; each rank
// then keeps its shard's slice in f32 and drops the rest, so only the shard's gradient outlives the
// reduction (grad_reduction.h).
#include <optional>
#include <utility>

#include "core/error.h"
#include "core/factory.h"
#include "parallel/data/data_parallel.h"
#include "parallel/zero/grad_reduction.h"

namespace tessera::parallel::zero {

namespace {

class AllReduceGrads : public GradReduction {
 public:
  AllReduceGrads(std::shared_ptr<const ZeroLayout> layout, int64_t bucket_cap_bytes,
                 bool broadcast_parameters)
      : layout_(std::move(layout)) {
    DataParallel::NamedParams named;
    for (size_t i = 0; i < layout_->params.size(); ++i)
      named.emplace_back(layout_->names[i], layout_->params[i]);
    dp_ = std::make_unique<DataParallel>(
        std::move(named), layout_->comm,
        DataParallelOptions{.bucket_cap_bytes = bucket_cap_bytes,
                            .broadcast_parameters = broadcast_parameters});
  }

  std::unique_ptr<Pause> pause() override { return std::make_unique<Paused>(dp_->no_sync()); }

  std::optional<std::vector<Tensor>> finish() override {
    if (!dp_->sync_enabled()) return std::nullopt;  // under no_sync, as DataParallel
    dp_->finish_gradient_sync();
    return shard_slices();
  }

  bool reduces_by_range() const override { return false; }
  void on_range_ready(RangeReady) override {
    TS_FAIL("zero",
            "the all-reduce of stage 1 hands over whole gradients after backward, not "
            "reduced ranges during it");
  }

 private:
  struct Paused : Pause {
    explicit Paused(DataParallel::NoSyncGuard g) : guard(std::move(g)) {}
    DataParallel::NoSyncGuard guard;
  };

  std::vector<Tensor> shard_slices() {
    const ZeroLayout& l = *layout_;
    HostMover& mover = *l.mover;
    std::vector<Tensor> out;
    for (size_t g = 0; g < l.groups(); ++g) {
      const int64_t n = l.plan.groups[g].shard_numel;
      // Zeroed each step: a piece whose gradient is undefined reads zero.
      const Tensor grad = l.shard_device == mover.host()
                              ? mover.kept_host_zeros(g, n, DType::f32, /*rezero=*/true)
                              : zeros({n}, {.dtype = DType::f32, .device = l.shard_device});
      for (const ShardPiece& pc : l.pieces[g]) {
        const Tensor src = l.params[pc.param].grad();
        if (src.defined())
          mover.copy(src.reshape({src.numel()}).narrow(0, pc.param_offset, pc.numel),
                     grad.narrow(0, pc.shard_offset, pc.numel));
      }
      out.push_back(grad);
    }
    mover.synchronize();  // the gradients' moves to the host are done
    for (const Tensor& t : l.params) t.set_grad(Tensor());
    return out;
  }

  std::shared_ptr<const ZeroLayout> layout_;
  std::unique_ptr<DataParallel> dp_;
};

}  // namespace

std::unique_ptr<GradReduction> make_all_reduce(std::shared_ptr<const ZeroLayout> layout,
                                               int64_t bucket_cap_bytes,
                                               bool broadcast_parameters) {
  return std::make_unique<AllReduceGrads>(std::move(layout), bucket_cap_bytes,
                                          broadcast_parameters);
}

}  // namespace tessera::parallel::zero

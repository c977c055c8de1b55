// Stages 2 and 3's gradient reduction: each parameter's gradient, as it arrives in the synced
// backward, goes into the bucket holding its flat range, and full buckets are reduced to the ranks
// that own them (stage2_reducer.h, "Stage 2" in sharded_optimizer.h); see grad_reduction.h.
#include <memory>
#include <optional>
#include <utility>

#include "core/error.h"
#include "parallel/zero/grad_reduction.h"
#include "parallel/zero/stage2_reducer.h"

namespace tessera::parallel::zero {

namespace {

class ReduceToOwnerGrads : public GradReduction {
 public:
  ReduceToOwnerGrads(std::shared_ptr<const ZeroLayout> layout, int64_t bucket_cap_bytes)
      : layout_(std::move(layout)) {
    const ZeroLayout& l = *layout_;
    reducer_ =
        std::make_shared<detail::Stage2Reducer>(l.comm, l.plan, l.params, l.names, l.group_dtypes,
                                                bucket_cap_bytes, l.shard_device, l.mover);
    // The hooks hold the reducer weakly: they outlive this object on the parameters.
    std::weak_ptr<detail::Stage2Reducer> weak = reducer_;
    for (size_t p = 0; p < l.params.size(); ++p) {
      l.params[p].add_grad_ready_hook([weak, p](const Tensor&) {
        if (auto r = weak.lock()) r->on_grad_ready(p);
      });
    }
  }
  // A Pause may keep the reducer alive past this object: it must not call back into its owner.
  ~ReduceToOwnerGrads() override { reducer_->on_shard_ready = nullptr; }

  std::unique_ptr<Pause> pause() override {
    TS_CHECK(!reducer_->step_active, "zero",
             "expected no_sync() between steps, got it after a synced backward started reducing "
             "gradients; call finish_gradient_sync() first");
    return std::make_unique<Paused>(reducer_);
  }

  std::optional<std::vector<Tensor>> finish() override { return reducer_->finish(); }

  bool reduces_by_range() const override { return true; }
  void on_range_ready(RangeReady hook) override { reducer_->on_shard_ready = std::move(hook); }

 private:
  // Restores the reducer's previous no_sync flag (pauses nest).
  struct Paused : Pause {
    explicit Paused(std::shared_ptr<detail::Stage2Reducer> r)
        : reducer(std::move(r)), previous(std::exchange(reducer->no_sync, true)) {}
    ~Paused() override { reducer->no_sync = previous; }
    std::shared_ptr<detail::Stage2Reducer> reducer;
    bool previous;
  };

  std::shared_ptr<const ZeroLayout> layout_;
  std::shared_ptr<detail::Stage2Reducer> reducer_;
};

}  // namespace

std::unique_ptr<GradReduction> make_reduce_to_owner(std::shared_ptr<const ZeroLayout> layout,
                                                    int64_t bucket_cap_bytes) {
  return std::make_unique<ReduceToOwnerGrads>(std::move(layout), bucket_cap_bytes);
}

}  // namespace tessera::parallel::zero

// The ZeRO update path: parallel::zero::ShardedOptimizer over the data group (update_engine.h).
#include <optional>

#include "models/train/update_engine.h"
#include "models/train/zero_report.h"

namespace tessera::train {

namespace {

// ZeRO stages 1-3: parallel::zero::ShardedOptimizer over the data group.
class ZeroUpdate : public UpdateEngine {
 public:
  explicit ZeroUpdate(const UpdateEngineSpec& spec)
      : zero_(spec.model->named_parameters(), spec.groups, spec.optimizer, spec.grad_group,
              parallel::zero::ZeroOptions{.stage = spec.zero_stage,
                                          .bucket_cap_bytes = spec.zero_bucket_bytes,
                                          .stage3 = spec.zero3,
                                          .offload = spec.zero_offload,
                                          .overlap_step = spec.zero_overlap_step,
                                          .sharded_masters = spec.zero3_masters}),
        checkpoint_(make_zero_checkpoint(zero_)),
        built_sharded_(!spec.zero3_masters.empty()) {}

  void set_grad_sync(bool sync) override {
    if (sync) {
      no_sync_.reset();
    } else if (!no_sync_) {
      no_sync_.emplace(zero_.no_sync());
    }
  }
  void sync_group(size_t) override {}
  void finish_gradients() override { zero_.finish_gradient_sync(); }
  const std::vector<Tensor>& step_params() const override { return zero_.shard_params(); }
  optim::Optimizer& optimizer() override { return zero_.optimizer(); }
  void step() override { zero_.step(); }
  double clip_grad_norm(double max_norm, const std::vector<bool>& counted,
                        const optim::SumReducer& reduce) override {
    return zero_.clip_grad_norm(max_norm, reduce, counted);
  }
  void finish_step() override {
    zero_.gather_parameters();
    zero_.zero_grad();
  }

  OptimizerCheckpoint& checkpoint() override { return *checkpoint_; }
  parallel::zero::Stage3Params::GatherWindow gather_window() override {
    return zero_.gather_window();
  }
  std::string describe() const override { return describe_zero(zero_, built_sharded_); }
  std::string placement_report() const override { return zero_placement_report(zero_); }

  nlohmann::json step_metrics() override {
    const parallel::zero::Stage3Params* s3 = zero_.stage3();
    if (!s3 || s3->options().placement.policy != parallel::zero::PlacementPolicy::auto_traced ||
        !s3->placement().placed)
      return nlohmann::json::object();
    const parallel::zero::Stage3Stats& now = s3->stats();
    nlohmann::json out = {{"zero_copies_made", now.chunk_fetches - last_.chunk_fetches},
                          {"zero_copies_dropped", now.chunk_evictions - last_.chunk_evictions},
                          {"zero_copied_bytes", now.fetched_bytes - last_.fetched_bytes},
                          {"zero_copy_peak_bytes", now.peak_copy_bytes},
                          {"zero_copy_bytes_between_steps", s3->placement().device_bytes}};
    last_ = now;
    return out;
  }

 private:
  parallel::zero::ShardedOptimizer zero_;
  std::unique_ptr<OptimizerCheckpoint> checkpoint_;
  bool built_sharded_ = false;        // its masters came from a sharded build (zero_build.h)
  parallel::zero::Stage3Stats last_;  // stage 3's counters at the last step_metrics()
  std::optional<parallel::zero::ShardedOptimizer::NoSyncGuard> no_sync_;
};

}  // namespace

std::unique_ptr<UpdateEngine> make_zero_update(const UpdateEngineSpec& spec) {
  return std::make_unique<ZeroUpdate>(spec);
}

}  // namespace tessera::train

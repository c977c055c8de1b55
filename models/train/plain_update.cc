// The plain update path: DataParallel's all-reduce, f32 masters of every parameter and one
// optimizer over them (update_engine.h).
#include <optional>

#include "models/train/update_engine.h"
#include "optim/make_optimizer.h"
#include "optim/mixed_precision.h"
#include "parallel/data/data_parallel.h"

namespace tessera::train {

namespace {

// DataParallel's all-reduce (with more than one data rank), f32 masters of every parameter, and
// one optimizer over them.
class PlainUpdate : public UpdateEngine {
 public:
  explicit PlainUpdate(const UpdateEngineSpec& spec)
      : masters_(spec.model->parameters()),
        optimizer_(optim::make_optimizer(spec.optimizer, masters_.master_groups(spec.groups))),
        checkpoint_(make_plain_checkpoint(masters_, *optimizer_)) {
    if (spec.grad_group && spec.grad_group->size() > 1)
      dp_ = std::make_unique<parallel::DataParallel>(
          spec.model->named_parameters(), spec.grad_group,
          parallel::DataParallelOptions{.completed_after_backward = spec.completed_after_backward,
                                        .sync_groups = spec.sync_groups});
  }

  void set_grad_sync(bool sync) override {
    if (!dp_) return;
    if (sync) {
      no_sync_.reset();
    } else if (!no_sync_) {
      no_sync_.emplace(dp_->no_sync());
    }
  }
  void sync_group(size_t g) override {
    if (dp_) dp_->sync_group(g);
  }
  void finish_gradients() override {
    if (dp_) dp_->finish_gradient_sync();
    masters_.grads_to_master();
  }
  const std::vector<Tensor>& step_params() const override { return masters_.masters(); }
  optim::Optimizer& optimizer() override { return *optimizer_; }
  double clip_grad_norm(double max_norm, const std::vector<bool>& counted,
                        const optim::SumReducer& reduce) override {
    const std::vector<Tensor>& params = masters_.masters();
    if (counted.empty()) return optim::clip_grad_norm(params, max_norm, reduce);
    std::vector<Tensor> mine;
    for (size_t i = 0; i < params.size(); ++i)
      if (counted[i]) mine.push_back(params[i]);
    return optim::clip_grad_norm(params, mine, max_norm, reduce);
  }
  void finish_step() override {
    masters_.master_to_model();
    masters_.zero_grad();
  }

  OptimizerCheckpoint& checkpoint() override { return *checkpoint_; }
  std::string describe() const override { return ""; }

 private:
  optim::MasterWeights masters_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<OptimizerCheckpoint> checkpoint_;
  std::unique_ptr<parallel::DataParallel> dp_;
  std::optional<parallel::DataParallel::NoSyncGuard> no_sync_;
};

}  // namespace

std::unique_ptr<UpdateEngine> make_plain_update(const UpdateEngineSpec& spec) {
  return std::make_unique<PlainUpdate>(spec);
}

}  // namespace tessera::train

// A user's ModelRecipe as the engine's Task (engine.h), and the bundled LM data as a BatchSource.
#include <sstream>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "models/train/engine.h"
#include "models/train/lm_data.h"

namespace tessera::train {

namespace {

class LmBatchSource : public BatchSource {
 public:
  LmBatchSource(std::unique_ptr<LmSource> source, std::string what)
      : source_(std::move(source)), what_(std::move(what)) {}

  Batch next(int64_t rows) override {
    LmBatch b = source_->next(rows);
    return {.input = b.input, .target = b.target};
  }
  nlohmann::json position() const override { return source_->position().to_json(); }
  void set_position(const nlohmann::json& p) override {
    source_->set_position(data::DataPosition::from_json(p));
  }
  std::string describe() const override { return what_; }

 private:
  std::unique_ptr<LmSource> source_;
  std::string what_;
};

class RecipeTask : public Task {
 public:
  RecipeTask(const ModelRecipe& recipe, const TaskContext& ctx)
      : recipe_(recipe), device_(ctx.device) {
    TS_CHECK(recipe_.build && recipe_.train_data, "train", "model recipe '", recipe_.name,
             "': expected its build and train_data functions to be set");
    const DataShard shard{.rank = ctx.data_rank, .ranks = ctx.data_size};
    train_ = recipe_.train_data(shard);
    TS_CHECK(train_ != nullptr, "train", "model recipe '", recipe_.name,
             "': train_data gave no source");
    if (recipe_.val_data) val_ = recipe_.val_data(shard);
    if (val_) start_ = val_->position();
    model_ = recipe_.build(nn::BuildContext(*ctx.init_gen, ctx.parallel), ctx.config->custom);
    TS_CHECK(model_ != nullptr, "train", "model recipe '", recipe_.name, "': build gave no model");
    staged_ = dynamic_cast<StagedModel*>(model_.get());
    const bool pipelined = ctx.config->parallel.pipeline > 1;
    TS_CHECK(!pipelined || (staged_ && staged_->stage().pipelined()), "train", "model recipe '",
             recipe_.name, "': parallel.pipeline ", ctx.config->parallel.pipeline,
             " needs a model that runs as pipeline stages (train::StagedModel, with its "
             "nn::PipelineStage planned from the build context); set parallel.pipeline to 1");
    TS_CHECK(pipelined || recipe_.loss, "train", "model recipe '", recipe_.name,
             "': expected its loss function to be set");
    model_->to(device_);
  }

  nn::Module& model() override { return *model_; }
  int64_t units_per_item() const override { return recipe_.units_per_item; }
  const char* unit() const override { return recipe_.unit.c_str(); }
  std::string data_description() const override {
    return recipe_.name + " (C++ API) on " + train_->describe();
  }

  Tensor micro_loss(int64_t micro_batch) override {
    return recipe_.loss(*model_, on_device(train_->next(micro_batch)));
  }

  const nn::PipelineStage* pipeline_stage() const override {
    return staged_ && staged_->stage().pipelined() ? &staged_->stage() : nullptr;
  }
  void draw_micro_batches(int64_t count, int64_t micro_batch) override {
    batches_.clear();
    for (int64_t i = 0; i < count; ++i) batches_.push_back(on_device(train_->next(micro_batch)));
  }
  Tensor stage_forward(int chunk, int64_t m, const Tensor& input) override {
    return staged_->stage_forward(chunk, input, batches_.at(size_t(m)));
  }
  std::vector<std::string> tied_parameters() const override {
    return staged_ ? staged_->tied_parameters() : std::vector<std::string>();
  }

  nlohmann::json data_state() const override { return train_->position(); }
  void load_data_state(const nlohmann::json& state) override { train_->set_position(state); }

  // The mean loss over the held-out batches, each weighted by its rows; the same batches every
  // time (the source rewinds).
  EvalResult evaluate(parallel::Communicator* group, int64_t batches, int64_t micro) override {
    EvalResult r;
    if (!val_ || batches == 0) return r;
    autograd::NoGradGuard no_grad;
    model_->eval();
    val_->set_position(start_);
    std::vector<Batch> val;
    for (int64_t i = 0; i < batches; ++i) val.push_back(on_device(val_->next(micro)));
    double loss_sum = 0, rows = 0;
    if (pipeline_) {
      const std::vector<Tensor> losses =
          pipeline_->run_forward(int(batches), {.forward = [&](int chunk, int m, const Tensor& in) {
                                   return staged_->stage_forward(chunk, in, val[size_t(m)]);
                                 }});
      for (size_t i = 0; i < losses.size(); ++i) {
        if (!losses[i].defined()) continue;  // not the last stage
        loss_sum += losses[i].item() * double(micro);
        rows += double(micro);
      }
    } else {
      for (const Batch& b : val) {
        loss_sum += recipe_.loss(*model_, b).item() * double(micro);
        rows += double(micro);
      }
    }
    model_->train();
    std::vector<double> total = sum_over_ranks(group, {loss_sum, rows});
    if (pipeline_) total = sum_over_ranks(&pipeline_->group(), total);
    const double loss = total[0] / total[1];
    r.metrics = {{"val_loss", loss}};
    std::ostringstream os;
    os.precision(4);
    os << std::fixed << "val loss " << loss;
    r.summary = os.str();
    return r;
  }

 private:
  // Batches come from the CPU; floating inputs take the model's dtype (bf16 / f16 training).
  Batch on_device(Batch b) const {
    const std::vector<Tensor> params = model_->parameters();
    const DType dtype = params.empty() ? DType::f32 : params.front().dtype();
    for (Tensor* t : {&b.input, &b.target}) {
      if (!t->defined()) continue;
      *t = t->to(device_);
      if (t == &b.input && is_floating(t->dtype()) && t->dtype() != dtype) *t = t->to(dtype);
    }
    return b;
  }

  ModelRecipe recipe_;
  Device device_;
  std::unique_ptr<BatchSource> train_, val_;
  nlohmann::json start_;  // where the held-out stream begins
  std::shared_ptr<nn::Module> model_;
  StagedModel* staged_ = nullptr;
  std::vector<Batch> batches_;  // this step's micro-batches (pipeline)
};

}  // namespace

std::unique_ptr<BatchSource> lm_batches(const TrainConfig& config, const DataShard& shard,
                                        bool held_out) {
  TS_CHECK(config.seq_len() > 0, "config",
           "train.seq_len: the LM data needs a sequence length for a custom model, got 0");
  LmSources sources = make_lm_sources(config.data, {.context = config.seq_len(),
                                                    .shuffle = config.data.shuffle,
                                                    .seed = config.train.seed,
                                                    .rank = shard.rank,
                                                    .world_size = shard.ranks});
  std::unique_ptr<LmSource>& source = held_out ? sources.val : sources.train;
  if (!source) return nullptr;
  const std::string& path = held_out ? config.data.val_path : config.data.path;
  return std::make_unique<LmBatchSource>(
      std::move(source), path.empty() ? std::string("built-in grammar text (bytes)")
                                      : "token file " + path);
}

std::unique_ptr<Task> make_recipe_task(const ModelRecipe& recipe, const TaskContext& ctx) {
  return std::make_unique<RecipeTask>(recipe, ctx);
}

}  // namespace tessera::train

// The ViT trainer's task: classification of the built-in grating images, top-1 accuracy on a
// held-out set.
#include <iomanip>
#include <sstream>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "models/data/sampler.h"
#include "models/train/synthetic_data.h"
#include "models/train/task.h"
#include "models/vit/vit.h"

namespace tessera::train {

namespace {

constexpr uint64_t kTrainImageSeed = 0x1AA6E;
constexpr uint64_t kValImageSeed = 0x1AA6F;
constexpr int64_t kValImages = 4096;

class VitTask : public Task {
 public:
  explicit VitTask(const TaskContext& ctx)
      : config_(*ctx.config),
        train_(ctx.config->data.builtin_images, {.shuffle = ctx.config->data.shuffle,
                                                 .seed = ctx.config->train.seed,
                                                 .rank = ctx.data_rank,
                                                 .world_size = ctx.data_size}),
        val_(kValImages,
             {.shuffle = false, .seed = 0, .rank = ctx.data_rank, .world_size = ctx.data_size}) {
    const TrainConfig& c = config_;
    TS_CHECK(c.data.path.empty() && c.data.val_path.empty(), "train",
             "data.path: the ViT trainer reads its built-in generated images only; expected no "
             "data.path or data.val_path, got '",
             c.data.path, "' / '", c.data.val_path, "'");
    image_ = {.image_size = c.vit.image_size,
              .channels = c.vit.in_channels,
              .num_classes = c.vit.num_classes,
              .noise = c.data.image_noise,
              .seed = kTrainImageSeed};
    model_ = std::make_shared<vit::ViT>(c.vit, *ctx.init_gen);
  }

  nn::Module& model() override { return *model_; }
  int64_t units_per_item() const override { return 1; }
  const char* unit() const override { return "img"; }
  std::string data_description() const override {
    std::ostringstream os;
    os << "built-in grating images " << image_.image_size << "x" << image_.image_size << ", "
       << image_.num_classes << " classes, noise std " << image_.noise
       << " (a matched filter classifies nearly 100% correctly)";
    return os.str();
  }

  Tensor micro_loss(int64_t micro_batch) override {
    ImageBatch b = make_images(train_.next(micro_batch), image_);
    return model_->loss(b.images.to(model_dtype()), b.labels);
  }

  nlohmann::json data_state() const override { return train_.position().to_json(); }
  void load_data_state(const nlohmann::json& j) override {
    train_.set_position(data::DataPosition::from_json(j));
  }

  EvalResult evaluate(parallel::Communicator* group, int64_t batches, int64_t micro) override {
    EvalResult r;
    if (batches == 0) return r;
    autograd::NoGradGuard no_grad;
    model_->eval();
    val_.set_position({});
    ImageOptions val_images = image_;
    val_images.seed = kValImageSeed;
    double loss_sum = 0, correct = 0, count = 0;
    for (int64_t i = 0; i < batches; ++i) {
      ImageBatch b = make_images(val_.next(micro), val_images);
      Tensor logits = model_->forward(b.images.to(model_dtype()));  // (B, classes)
      Tensor pred = argmax(logits, -1).contiguous();
      const double n = double(b.labels.numel());
      loss_sum += cross_entropy(logits, b.labels).item() * n;
      for (int64_t k = 0; k < pred.numel(); ++k)
        correct += pred.data<int64_t>()[k] == b.labels.data<int64_t>()[k] ? 1 : 0;
      count += n;
    }
    model_->train();
    const std::vector<double> t = sum_over_ranks(group, {loss_sum, correct, count});
    r.metrics = {{"val_loss", t[0] / t[2]}, {"top1", t[1] / t[2]}};
    std::ostringstream os;
    os << std::fixed << std::setprecision(4) << "val loss " << t[0] / t[2] << " | top-1 "
       << std::setprecision(2) << 100.0 * t[1] / t[2] << "%";
    r.summary = os.str();
    return r;
  }

 private:
  DType model_dtype() const { return model_->parameters().front().dtype(); }

  const TrainConfig& config_;
  data::Sampler train_, val_;
  ImageOptions image_;
  std::shared_ptr<vit::ViT> model_;
};

}  // namespace

std::unique_ptr<Task> make_vit_task(const TaskContext& ctx) {
  return std::make_unique<VitTask>(ctx);
}

}  // namespace tessera::train

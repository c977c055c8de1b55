// The ViT trainer's task: classification of the built-in grating images, or of CIFAR-10 / an
// image folder (image_data.h), with top-1 accuracy on a held-out set.
#include <iomanip>
#include <optional>
#include <sstream>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "models/data/image_loader.h"
#include "models/data/sampler.h"
#include "models/train/image_data.h"
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
        device_(ctx.device),
        train_(ctx.config->data.builtin_images, {.shuffle = ctx.config->data.shuffle,
                                                 .seed = ctx.config->train.seed,
                                                 .rank = ctx.data_rank,
                                                 .world_size = ctx.data_size}),
        val_(kValImages,
             {.shuffle = false, .seed = 0, .rank = ctx.data_rank, .world_size = ctx.data_size}) {
    const TrainConfig& c = config_;
    if (!c.data.type.empty()) {
      images_ = load_image_data(c.data, c.vit);
      loader_.emplace(images_.train,
                      data::ImageLoaderOptions{.sampling = {.shuffle = c.data.shuffle,
                                                            .seed = c.train.seed,
                                                            .rank = ctx.data_rank,
                                                            .world_size = ctx.data_size},
                                               .augment = {.crop_padding = c.data.crop_padding,
                                                           .hflip = c.data.hflip,
                                                           .seed = c.train.seed}});
      data_rank_ = ctx.data_rank;
      data_size_ = ctx.data_size;
    }
    TS_CHECK(!c.data.type.empty() || (c.data.path.empty() && c.data.val_path.empty()), "train",
             "data.path: the ViT trainer reads its built-in generated images only; expected no "
             "data.path or data.val_path, got '",
             c.data.path, "' / '", c.data.val_path, "'");
    image_ = {.image_size = c.vit.image_size,
              .channels = c.vit.in_channels,
              .num_classes = c.vit.num_classes,
              .noise = c.data.image_noise,
              .seed = kTrainImageSeed};
    model_ = std::make_shared<vit::ViT>(c.vit, nn::BuildContext(*ctx.init_gen, ctx.parallel));
    model_->to(device_);
  }

  nn::Module& model() override { return *model_; }
  int64_t units_per_item() const override { return 1; }
  const char* unit() const override { return "img"; }
  std::string data_description() const override {
    std::ostringstream os;
    if (loader_) {
      const data::ImageDataset& t = *images_.train;
      os << t.source() << ": " << t.num_images() << " training images " << t.image_size() << "x"
         << t.image_size() << ", " << t.num_classes() << " classes";
      if (images_.val) os << ", " << images_.val->num_images() << " held out";
      if (!images_.skipped.empty()) os << ", " << images_.skipped.size() << " files skipped";
      if (config_.data.crop_padding > 0)
        os << ", random crop (padding " << config_.data.crop_padding << ")";
      if (config_.data.hflip) os << ", random flip";
      return os.str();
    }
    os << "built-in grating images " << image_.image_size << "x" << image_.image_size << ", "
       << image_.num_classes << " classes, noise std " << image_.noise
       << " (a matched filter classifies nearly 100% correctly)";
    return os.str();
  }

  Tensor micro_loss(int64_t micro_batch) override {
    return forward_on(next_batch(micro_batch), 0, Tensor(), true);
  }

  const nn::PipelineStage* pipeline_stage() const override {
    return model_->stage().pipelined() ? &model_->stage() : nullptr;
  }
  void draw_micro_batches(int64_t count, int64_t micro_batch) override {
    batches_.clear();
    for (int64_t i = 0; i < count; ++i) batches_.push_back(next_batch(micro_batch));
  }
  Tensor stage_forward(int chunk, int64_t m, const Tensor& input) override {
    return forward_on(batches_.at(size_t(m)), chunk, input, true);
  }

  nlohmann::json data_state() const override {
    return (loader_ ? loader_->position() : train_.position()).to_json();
  }
  void load_data_state(const nlohmann::json& j) override {
    if (loader_)
      loader_->set_position(data::DataPosition::from_json(j));
    else
      train_.set_position(data::DataPosition::from_json(j));
  }

  EvalResult evaluate(parallel::Communicator* group, int64_t batches, int64_t micro) override {
    EvalResult r;
    if (batches == 0 || (loader_ && !images_.val)) return r;
    autograd::NoGradGuard no_grad;
    model_->eval();
    val_.set_position({});
    ImageOptions val_images = image_;
    val_images.seed = kValImageSeed;
    double loss_sum = 0, correct = 0, count = 0;
    // Adds a batch's summed loss, correct predictions and images.
    auto score = [&](const Tensor& logits, const Tensor& labels_cpu) {  // (B, classes), (B)
      Tensor pred = argmax(logits, -1).to(kCPU).contiguous();
      const Tensor labels = labels_cpu.contiguous();
      const double n = double(labels.numel());
      loss_sum += cross_entropy(logits, labels.to(device_)).item() * n;
      for (int64_t k = 0; k < pred.numel(); ++k)
        correct += pred.data<int64_t>()[k] == labels.data<int64_t>()[k] ? 1 : 0;
      count += n;
    };
    auto held_out = [&](int64_t i) {
      return loader_ ? held_out_batch(i, micro) : make_images(val_.next(micro), val_images);
    };
    if (pipeline_) {
      // Micro-batch after micro-batch through the stages (every stage of a data rank has the same
      // batches); the last one scores each batch as its logits come out, the others add zeros.
      std::vector<ImageBatch> val;
      for (int64_t i = 0; i < batches; ++i) {
        ImageBatch b = held_out(i);
        if (b.labels.numel() > 0) val.push_back(std::move(b));  // past the end: nothing left
      }
      parallel::pipeline::StageCallbacks callbacks;
      callbacks.forward = [&](int chunk, int m, const Tensor& in) {
        const ImageBatch& b = val[size_t(m)];
        Tensor out = forward_on(b, chunk, in, false);
        if (!model_->stage().last_chunk(chunk)) return out;
        score(out, b.labels);
        return Tensor();
      };
      pipeline_->run_forward(int(val.size()), callbacks);
    } else {
      for (int64_t i = 0; i < batches; ++i) {
        const ImageBatch b = held_out(i);
        if (b.labels.numel() == 0) continue;  // this rank is past the end of the held-out set
        score(forward_on(b, 0, Tensor(), false), b.labels);
      }
    }
    model_->train();
    std::vector<double> t = sum_over_ranks(group, {loss_sum, correct, count});
    if (pipeline_) t = sum_over_ranks(&pipeline_->group(), t);
    if (t[2] == 0) return r;
    r.metrics = {{"val_loss", t[0] / t[2]}, {"top1", t[1] / t[2]}};
    std::ostringstream os;
    os << std::fixed << std::setprecision(4) << "val loss " << t[0] / t[2] << " | top-1 "
       << std::setprecision(2) << 100.0 * t[1] / t[2] << "%";
    r.summary = os.str();
    return r;
  }

 private:
  DType model_dtype() const { return model_->parameters().front().dtype(); }
  // (B, C, H, W) f32 images from the CPU: moved first, then converted on the device.
  Tensor on_device(const Tensor& images) const { return images.to(device_).to(model_dtype()); }

  // This rank's next training micro-batch (images and labels on the CPU).
  ImageBatch next_batch(int64_t micro_batch) {
    if (!loader_) return make_images(train_.next(micro_batch), image_);
    data::ImageBatch b = loader_->next(micro_batch);
    return {b.images, b.labels};
  }

  // Chunk `chunk`'s forward on batch b: the images on the first stage; the loss (with_loss) or
  // the logits on the last.
  Tensor forward_on(const ImageBatch& b, int chunk, const Tensor& input, bool with_loss) {
    const nn::PipelineStage& s = model_->stage();
    return model_->stage_forward(
        chunk, s.first_chunk(chunk) ? on_device(b.images) : input,
        s.last_chunk(chunk) && with_loss ? b.labels.to(device_) : Tensor());
  }

  // Held-out images in order, each once: batch i of this rank (empty past the end of the set).
  ImageBatch held_out_batch(int64_t i, int64_t micro) const {
    const std::vector<int64_t> items =
        data::eval_items(images_.val->num_images(), i, micro, data_rank_, data_size_);
    data::ImageBatch b = data::make_image_batch(*images_.val, items);
    return {b.images, b.labels};
  }

  const TrainConfig& config_;
  Device device_;
  data::Sampler train_, val_;
  ImageOptions image_;
  std::shared_ptr<vit::ViT> model_;
  ImageData images_;  // data.type set: CIFAR-10 or image folders, read by loader_
  std::optional<data::ImageLoader> loader_;
  int64_t data_rank_ = 0, data_size_ = 1;
  std::vector<ImageBatch> batches_;  // this step's micro-batches (pipeline)
};

}  // namespace

std::unique_ptr<Task> make_vit_task(const TaskContext& ctx) {
  return std::make_unique<VitTask>(ctx);
}

}  // namespace tessera::train

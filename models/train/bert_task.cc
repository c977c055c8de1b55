// The BERT trainer's task: masked-LM loss (80/10/10 masking) on windows of the built-in grammar
// text or a token file, and masked-LM accuracy on held-out windows.
#include <iomanip>
#include <sstream>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "models/bert/bert.h"
#include "models/train/lm_data.h"
#include "models/train/synthetic_data.h"
#include "models/train/task.h"

namespace tessera::train {

namespace {

class BertTask : public Task {
 public:
  explicit BertTask(const TaskContext& ctx) : config_(*ctx.config), device_(ctx.device) {
    const TrainConfig& c = config_;
    TS_CHECK(c.bert.mlm_head, "train",
             "model.mlm_head: the BERT trainer trains the masked-LM head; "
             "expected true, got false");
    LmSourceOptions train{.context = c.seq_len(),
                          .shuffle = c.data.shuffle,
                          .seed = c.train.seed,
                          .rank = ctx.data_rank,
                          .world_size = ctx.data_size};
    LmSources sources = make_lm_sources(c.data, train);
    train_ = std::move(sources.train);
    val_ = std::move(sources.val);
    // [MASK] is the first id past the data's vocabulary.
    mask_.mask_id = train_->vocab_size();
    mask_.random_vocab = train_->vocab_size();
    mask_.mask_prob = c.data.mask_prob;
    mask_.seed = c.train.seed;
    TS_CHECK(mask_.mask_id < c.bert.vocab_size, "train", "expected model.vocab_size > ",
             mask_.mask_id, " (the data's ", mask_.mask_id, " ids plus [MASK]), got ",
             c.bert.vocab_size);
    TS_CHECK(!val_ || val_->vocab_size() <= mask_.mask_id, "train",
             "expected the validation data's "
             "vocabulary to fit the training data's (",
             mask_.mask_id, " ids), got ", val_->vocab_size());
    model_ = std::make_shared<bert::Bert>(c.bert, nn::BuildContext(*ctx.init_gen, ctx.parallel));
    model_->to(device_);
  }

  nn::Module& model() override { return *model_; }
  int64_t units_per_item() const override { return config_.seq_len(); }
  const char* unit() const override { return "tok"; }
  std::string data_description() const override {
    std::ostringstream os;
    os << (config_.data.path.empty() ? std::string("built-in grammar text")
                                     : "token file " + config_.data.path)
       << ", masked LM: " << 100 * mask_.mask_prob << "% of positions (80% [MASK] = id "
       << mask_.mask_id << ", 10% random, 10% kept)";
    return os.str();
  }

  Tensor micro_loss(int64_t micro_batch) override {
    LmBatch b = train_->next(micro_batch);
    MlmBatch m = mlm_mask(b.input, b.first_item, mask_);
    return model_->mlm_loss(model_->forward(m.input.to(device_)), m.labels.to(device_));
  }

  nlohmann::json data_state() const override { return train_->position().to_json(); }
  void load_data_state(const nlohmann::json& j) override {
    train_->set_position(data::DataPosition::from_json(j));
  }

  EvalResult evaluate(parallel::Communicator* group, int64_t batches, int64_t micro) override {
    EvalResult r;
    if (!val_ || batches == 0) return r;
    autograd::NoGradGuard no_grad;
    model_->eval();
    val_->set_position({});
    MlmOptions val_mask = mask_;
    val_mask.seed = mask_.seed + 1;
    double loss_sum = 0, correct = 0, count = 0;
    for (int64_t i = 0; i < batches; ++i) {
      LmBatch b = val_->next(micro);
      MlmBatch m = mlm_mask(b.input, b.first_item, val_mask);
      Tensor logits = model_->mlm_logits(model_->forward(m.input.to(device_)));  // (B, T, V)
      Tensor loss = cross_entropy(logits, m.labels.to(device_));
      Tensor pred = argmax(logits, -1).to(kCPU).contiguous();  // (B, T)
      const Tensor labels = m.labels.contiguous();             // (B, T) on the CPU
      const int64_t* p = pred.data<int64_t>();
      const int64_t* y = labels.data<int64_t>();
      double n = 0;
      for (int64_t k = 0; k < pred.numel(); ++k) {
        if (y[k] < 0) continue;
        n += 1;
        correct += p[k] == y[k] ? 1 : 0;
      }
      loss_sum += loss.item() * n;
      count += n;
    }
    model_->train();
    const std::vector<double> t = sum_over_ranks(group, {loss_sum, correct, count});
    r.metrics = {{"mlm_loss", t[0] / t[2]}, {"mlm_accuracy", t[1] / t[2]}};
    std::ostringstream os;
    os << std::fixed << std::setprecision(4) << "val mlm loss " << t[0] / t[2] << " | mlm accuracy "
       << std::setprecision(2) << 100.0 * t[1] / t[2] << "%";
    r.summary = os.str();
    return r;
  }

 private:
  const TrainConfig& config_;
  Device device_;
  std::unique_ptr<LmSource> train_, val_;
  MlmOptions mask_;
  std::shared_ptr<bert::Bert> model_;
};

}  // namespace

std::unique_ptr<Task> make_bert_task(const TaskContext& ctx) {
  return std::make_unique<BertTask>(ctx);
}

}  // namespace tessera::train

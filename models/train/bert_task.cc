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
    return forward_on(masked(train_->next(micro_batch), mask_), 0, Tensor(), true);
  }

  const nn::PipelineStage* pipeline_stage() const override {
    return model_->stage().pipelined() ? &model_->stage() : nullptr;
  }
  void draw_micro_batches(int64_t count, int64_t micro_batch) override {
    batches_.clear();
    for (int64_t i = 0; i < count; ++i)
      batches_.push_back(masked(train_->next(micro_batch), mask_));
  }
  Tensor stage_forward(int chunk, int64_t m, const Tensor& input) override {
    return forward_on(batches_.at(size_t(m)), chunk, input, true);
  }
  // The MLM decoder's weight, held by the first stage (embeddings) and the last (decoder).
  std::vector<std::string> tied_parameters() const override {
    return {"embeddings.word_embeddings.weight"};
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
    // Adds a batch's summed loss, correct predictions and labelled positions.
    // Under parallel.sequence the logits are this rank's positions, scored against their labels;
    // the sums over the data x sequence group are the whole sequences' (a shard may hold none).
    auto score = [&](const Tensor& logits, const Tensor& all_labels) {  // (B, T, V), (B, T)
      const Tensor labels_cpu = model_->sequence_shard().take(all_labels, 1);
      Tensor pred = argmax(logits, -1).to(kCPU).contiguous();  // (B, T)
      const Tensor labels = labels_cpu.contiguous();
      const int64_t* p = pred.data<int64_t>();
      const int64_t* y = labels.data<int64_t>();
      double n = 0;
      for (int64_t k = 0; k < pred.numel(); ++k) {
        if (y[k] < 0) continue;
        n += 1;
        correct += p[k] == y[k] ? 1 : 0;
      }
      if (n > 0) loss_sum += cross_entropy(logits, labels_cpu.to(device_)).item() * n;
      count += n;
    };
    if (pipeline_) {
      // Micro-batch after micro-batch through the stages; the last one scores each batch as its
      // logits come out (the other stages add zeros to the sums below).
      std::vector<MlmBatch> val;
      for (int64_t i = 0; i < batches; ++i) val.push_back(masked(val_->next(micro), val_mask));
      parallel::pipeline::StageCallbacks callbacks;
      callbacks.forward = [&](int chunk, int m, const Tensor& in) {
        const MlmBatch& b = val[size_t(m)];
        Tensor out = forward_on(b, chunk, in, false);
        if (!model_->stage().last_chunk(chunk)) return out;
        score(out, b.labels);
        return Tensor();
      };
      pipeline_->run_forward(int(batches), callbacks);
    } else {
      for (int64_t i = 0; i < batches; ++i) {
        const MlmBatch b = masked(val_->next(micro), val_mask);
        score(forward_on(b, 0, Tensor(), false), b.labels);
      }
    }
    model_->train();
    std::vector<double> t = sum_over_ranks(group, {loss_sum, correct, count});
    if (pipeline_) t = sum_over_ranks(&pipeline_->group(), t);
    r.metrics = {{"mlm_loss", t[0] / t[2]}, {"mlm_accuracy", t[1] / t[2]}};
    std::ostringstream os;
    os << std::fixed << std::setprecision(4) << "val mlm loss " << t[0] / t[2] << " | mlm accuracy "
       << std::setprecision(2) << 100.0 * t[1] / t[2] << "%";
    r.summary = os.str();
    return r;
  }

 private:
  static MlmBatch masked(const LmBatch& b, const MlmOptions& options) {
    return mlm_mask(b.input, b.first_item, options);
  }

  // Chunk `chunk`'s forward on batch b: the masked ids on the first stage; the MLM loss
  // (with_loss) or the logits on the last. The windows are whole, so there is no padding mask; a
  // padded batch's mask would go to every stage's blocks here, from the stage's own copy of b.
  Tensor forward_on(const MlmBatch& b, int chunk, const Tensor& input, bool with_loss) {
    const nn::PipelineStage& s = model_->stage();
    return model_->stage_forward(
        chunk, s.first_chunk(chunk) ? b.input.to(device_) : input,
        /*attention_mask=*/Tensor(),
        s.last_chunk(chunk) && with_loss ? b.labels.to(device_) : Tensor());
  }

  const TrainConfig& config_;
  Device device_;
  std::unique_ptr<LmSource> train_, val_;
  MlmOptions mask_;
  std::shared_ptr<bert::Bert> model_;
  std::vector<MlmBatch> batches_;  // this step's micro-batches (pipeline)
};

}  // namespace

std::unique_ptr<Task> make_bert_task(const TaskContext& ctx) {
  return std::make_unique<BertTask>(ctx);
}

}  // namespace tessera::train

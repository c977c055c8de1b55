// The GPT trainer's task: next-token loss on the built-in grammar text or a token file,
// validation loss and perplexity, and a generated sample at the end.
#include <cmath>
#include <iomanip>
#include <sstream>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/factory.h"
#include "models/data/tokenizer.h"
#include "models/gpt/gpt.h"
#include "models/train/lm_data.h"
#include "models/train/synthetic_data.h"
#include "models/train/task.h"

namespace tessera::train {

namespace {

class GptTask : public Task {
 public:
  explicit GptTask(const TaskContext& ctx) : config_(*ctx.config), device_(ctx.device) {
    const TrainConfig& c = config_;
    const int64_t T = c.seq_len();
    LmSourceOptions train{.context = T,
                          .shuffle = c.data.shuffle,
                          .seed = c.train.seed,
                          .rank = ctx.data_rank,
                          .world_size = ctx.data_size};
    LmSources sources = make_lm_sources(c.data, train);
    train_ = std::move(sources.train);
    val_ = std::move(sources.val);
    for (const LmSource* s : {train_.get(), val_.get()}) {
      TS_CHECK(!s || s->vocab_size() <= c.gpt.vocab_size, "train",
               "expected the data's vocabulary (", s ? s->vocab_size() : 0,
               " ids) to fit model.vocab_size ", c.gpt.vocab_size,
               c.data.path.empty() ? " (the built-in text is bytes: 256 ids)" : "");
    }
    model_ = std::make_shared<gpt::GPT>(c.gpt, nn::BuildContext(*ctx.init_gen, ctx.parallel));
    model_->to(device_);
  }

  nn::Module& model() override { return *model_; }
  int64_t units_per_item() const override { return config_.seq_len(); }
  const char* unit() const override { return "tok"; }
  std::string data_description() const override {
    if (!config_.data.path.empty()) return "token file " + config_.data.path;
    std::ostringstream os;
    os << std::fixed << std::setprecision(3) << "built-in grammar text, " << train_->num_windows()
       << " windows of " << config_.seq_len() << " bytes (best achievable loss "
       << grammar_stats().nats_per_token() << " nats/token)";
    return os.str();
  }

  Tensor micro_loss(int64_t micro_batch) override {
    LmBatch b = train_->next(micro_batch);
    return model_->loss(b.input.to(device_), b.target.to(device_));
  }

  const nn::PipelineStage* pipeline_stage() const override {
    return model_->stage().pipelined() ? &model_->stage() : nullptr;
  }
  void draw_micro_batches(int64_t count, int64_t micro_batch) override {
    batches_.clear();
    for (int64_t i = 0; i < count; ++i) batches_.push_back(train_->next(micro_batch));
  }
  Tensor stage_forward(int chunk, int64_t m, const Tensor& input) override {
    return forward_on(batches_.at(size_t(m)), chunk, input, true);
  }
  std::vector<std::string> tied_parameters() const override {
    if (!config_.gpt.tie_embeddings) return {};
    return {"wte.weight"};
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
    double loss_sum = 0, count = 0;
    if (pipeline_) {
      // Micro-batch after micro-batch through the stages; the last one holds the losses.
      std::vector<LmBatch> val;
      for (int64_t i = 0; i < batches; ++i) val.push_back(val_->next(micro));
      const std::vector<Tensor> losses =
          pipeline_->run_forward(int(batches), {.forward = [&](int chunk, int m, const Tensor& in) {
                                   return forward_on(val[size_t(m)], chunk, in, true);
                                 }});
      for (size_t i = 0; i < losses.size(); ++i) {
        if (!losses[i].defined()) continue;
        const double n = double(val[i].input.numel());
        loss_sum += losses[i].item() * n;
        count += n;
      }
    } else {
      for (int64_t i = 0; i < batches; ++i) {
        LmBatch b = val_->next(micro);
        const double n = double(b.input.numel());
        loss_sum += model_->loss(b.input.to(device_), b.target.to(device_)).item() * n;
        count += n;
      }
    }
    model_->train();
    std::vector<double> total = sum_over_ranks(group, {loss_sum, count});
    if (pipeline_) total = sum_over_ranks(&pipeline_->group(), total);
    const double loss = total[0] / total[1];
    r.metrics = {{"val_loss", loss}, {"val_ppl", std::exp(loss)}};
    std::ostringstream os;
    os << std::fixed << std::setprecision(4) << "val loss " << loss << " | val ppl "
       << std::setprecision(3) << std::exp(loss);
    r.summary = os.str();
    return r;
  }

  void finish(std::ostream& out) override {
    const TrainSection& t = config_.train;
    if (t.sample_tokens <= 0) return;
    const DataSection& d = config_.data;
    auto tokenizer =
        data::make_tokenizer({.kind = d.tokenizer, .vocab_path = d.vocab, .merges_path = d.merges});
    std::vector<uint32_t> prompt = tokenizer->encode(t.sample_prompt);
    if (prompt.empty()) prompt.push_back(0);
    std::vector<int64_t> ids(prompt.begin(), prompt.end());
    Generator gen(t.seed + 7);
    gpt::GPT::NextLogits next_logits;
    if (pipeline_) next_logits = [&](const Tensor& window) { return pipelined_logits(window); };
    Tensor result =
        model_->generate(from_vector<int64_t>(ids, {1, int64_t(ids.size())}).to(device_),
                         t.sample_tokens, t.sample_temperature, t.sample_top_k, gen, next_logits);
    out << "sample (temperature " << t.sample_temperature << ", " << t.sample_tokens
        << " tokens):\n"
        << decode_ids(*tokenizer, result) << "\n";
  }

  // Decodes (1, N) ids, writing ids the tokenizer does not know as '?'.
  static std::string decode_ids(const data::Tokenizer& tokenizer, const Tensor& ids) {
    std::vector<uint32_t> known;
    const Tensor c = ids.to(kCPU).contiguous();
    for (int64_t i = 0; i < c.numel(); ++i) {
      const int64_t id = c.data<int64_t>()[i];
      known.push_back(id < tokenizer.vocab_size() ? uint32_t(id) : uint32_t('?'));
    }
    return tokenizer.decode(known);
  }

 private:
  // Chunk `chunk`'s forward on batch b: the ids on the first stage, the loss (with_loss) or the
  // logits on the last.
  Tensor forward_on(const LmBatch& b, int chunk, const Tensor& input, bool with_loss) {
    const nn::PipelineStage& s = model_->stage();
    return model_->stage_forward(chunk, s.first_chunk(chunk) ? b.input.to(device_) : input,
                                 s.last_chunk(chunk) && with_loss ? b.target.to(device_) : Tensor());
  }

  // Generation under a pipeline: the window runs through the stages, and the last stage's logits
  // at the last position (B, V) f32 are broadcast over the pipeline group, so every stage samples
  // the same token.
  Tensor pipelined_logits(const Tensor& window) {
    // Sequence parallelism (Megatron's over the tensor group, or the paper's over the sequence
    // group) splits T: pad on the right to a multiple of it (the model is causal, so the last real
    // position never sees the padding), as GPT::forward; 2D and 3D split the batch: pad rows of
    // id 0, whose logits are dropped.
    const int64_t parts = model_->window_multiple();
    const int64_t b = window.size(0), t = window.size(1), pad = (parts - t % parts) % parts;
    const int64_t rows = model_->batch_padding(b);
    const TensorOptions like{.dtype = window.dtype(), .device = window.device()};
    Tensor padded = pad == 0 ? window : cat({window, zeros({b, pad}, like)}, 1);
    if (rows > 0) padded = cat({padded, zeros({rows, padded.size(1)}, like)}, 0);
    const LmBatch batch{.input = padded, .target = Tensor()};
    const std::vector<Tensor> out =
        pipeline_->run_forward(1, {.forward = [&](int chunk, int, const Tensor& in) {
                                 return forward_on(batch, chunk, in, false);
                               }});
    Tensor last = empty({window.size(0), config_.gpt.vocab_size}, {.dtype = DType::f32});
    parallel::Communicator& group = pipeline_->group();
    if (out[0].defined())
      last.copy_(narrow(out[0], 0, 0, b).select(1, t - 1).to(kCPU).to(DType::f32));
    group.broadcast(last, group.size() - 1)->wait();
    return last;
  }

  const TrainConfig& config_;
  Device device_;
  std::unique_ptr<LmSource> train_, val_;
  std::shared_ptr<gpt::GPT> model_;
  std::vector<LmBatch> batches_;  // this step's micro-batches (pipeline)
};

}  // namespace

std::unique_ptr<Task> make_gpt_task(const TaskContext& ctx) {
  return std::make_unique<GptTask>(ctx);
}

}  // namespace tessera::train

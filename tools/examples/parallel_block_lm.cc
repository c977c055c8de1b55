// A model that is none of the bundled three, trained through the engine API (models/train/
// engine.h): a language model of GPT-J / PaLM "parallel" blocks, x + attn(ln(x)) + mlp(ln(x)),
// where attention and the MLP read one LayerNorm side by side, and an untied head. It is written
// once, as serial code against the models/nn factories; the configuration alone runs it under
// data, pipeline, tensor (every mode) and sequence parallelism and ZeRO.
//
//   bazel-bin/tools/examples/parallel_block_lm [--set key=value ...]
//   mpirun -np 8 bazel-bin/tools/examples/parallel_block_lm --set parallel.tensor.size=2 \
//       --set parallel.pipeline=2
//
// The defaults train on the built-in grammar text; --set edits any key of the configuration
// below, as `tessera train --set` does.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "core/error.h"
#include "core/factory.h"
#include "models/nn/dropout.h"
#include "models/nn/factory.h"
#include "models/nn/module_list.h"
#include "models/nn/pipeline_stage.h"
#include "models/nn/sequence_shard.h"
#include "models/train/engine.h"
#include "parallel/comm/mpi_runtime.h"

using namespace tessera;
using nlohmann::json;

namespace {

struct LmConfig {
  int64_t vocab_size = 256;
  int64_t context = 64;
  int64_t d_model = 64;
  int64_t n_heads = 4;
  int64_t n_layers = 4;
  double dropout = 0.0;

  static LmConfig from_json(const json& j) {
    LmConfig c;
    for (const auto& [key, value] : j.items()) {
      if (key == "vocab_size") c.vocab_size = value.get<int64_t>();
      else if (key == "context") c.context = value.get<int64_t>();
      else if (key == "d_model") c.d_model = value.get<int64_t>();
      else if (key == "n_heads") c.n_heads = value.get<int64_t>();
      else if (key == "n_layers") c.n_layers = value.get<int64_t>();
      else if (key == "dropout") c.dropout = value.get<double>();
      else TS_FAIL("config", "model.", key, ": unknown key of the parallel-block LM");
    }
    return c;
  }
};

// One LayerNorm feeding attention and the MLP side by side; both add into the residual.
class ParallelBlock : public nn::Module {
 public:
  ParallelBlock(const LmConfig& c, const nn::BuildContext& ctx) {
    ln_ = register_module("ln", nn::make_layer_norm({.dim = c.d_model}, ctx));
    attn_ = register_module("attn", nn::make_attention({.d_model = c.d_model,
                                                        .n_heads = c.n_heads,
                                                        .causal = true,
                                                        .attn_dropout = c.dropout,
                                                        .resid_dropout = c.dropout,
                                                        .residual_layers = c.n_layers},
                                                       ctx));
    mlp_ = register_module("mlp", nn::make_mlp({.d_model = c.d_model,
                                                .dropout = c.dropout,
                                                .residual_layers = c.n_layers},
                                               ctx));
  }
  std::string type_name() const override { return "ParallelBlock"; }

  Tensor forward(const Tensor& x) {
    const Tensor h = ln_->forward(x);
    return x + attn_->forward(h) + mlp_->forward(h);
  }

 private:
  std::shared_ptr<nn::LayerNorm> ln_;
  std::shared_ptr<nn::MultiHeadAttention> attn_;
  std::shared_ptr<nn::MLP> mlp_;
};

// Token and position embeddings, the blocks, a final LayerNorm and an untied head. Its pipeline
// units are declared as GPT's are: the embeddings, each block, the head (nn::PipelineStage).
class ParallelBlockLM : public nn::Module, public train::StagedModel {
 public:
  ParallelBlockLM(const LmConfig& c, const nn::BuildContext& ctx) : config_(c), sp_(ctx) {
    const int64_t d = c.d_model;
    stage_ = nn::PipelineStage::plan(ctx, c.n_layers, /*block_params=*/12 * d * d,
                                     /*first_extra=*/(c.vocab_size + c.context) * d,
                                     /*last_extra=*/c.vocab_size * d);
    // What this rank does not hold is built aside and dropped (skip), so every weight it holds is
    // drawn where the serial build draws it.
    auto wte = [&] {
      return nn::make_embedding({.num_embeddings = c.vocab_size, .dim = d}, ctx,
                                nn::ParallelStyle::vocab);
    };
    auto wpe = [&] { return nn::make_embedding({.num_embeddings = c.context, .dim = d}, ctx); };
    if (stage_.holds_embeddings()) {
      wte_ = register_module("wte", wte());
      stage_.hold("wte", *wte_);
      wpe_ = register_module("wpe", wpe());
      stage_.hold("wpe", *wpe_);
    } else {
      stage_.skip("wte", wte);
      stage_.skip("wpe", wpe);
    }
    drop_ = register_module("drop", nn::make_dropout(c.dropout, ctx));
    blocks_ = register_module("h", std::make_shared<nn::ModuleList>());
    slots_ = stage_.build_blocks("h", *blocks_, c.n_layers,
                                 [&] { return std::make_shared<ParallelBlock>(c, ctx); });
    auto ln_f = [&] { return nn::make_layer_norm({.dim = d}, ctx); };
    auto head = [&] {
      return nn::make_lm_head({.d_model = d, .vocab_size = c.vocab_size}, ctx,
                              nn::ParallelStyle::vocab);
    };
    if (stage_.holds_head()) {
      ln_f_ = register_module("ln_f", ln_f());
      stage_.hold("ln_f", *ln_f_);
      head_ = register_module("lm_head", head());
      stage_.hold("lm_head", *head_);
    } else {
      stage_.skip("ln_f", ln_f);
      stage_.skip("lm_head", head);
    }
  }
  std::string type_name() const override { return "ParallelBlockLM"; }

  // The whole model on this rank: the mean next-token loss of ids (B, T) against targets.
  Tensor loss(const Tensor& ids, const Tensor& targets) {
    return stage_forward(0, Tensor(), {.input = ids, .target = targets});
  }

  const nn::PipelineStage& stage() const override { return stage_; }
  Tensor stage_forward(int chunk, const Tensor& input, const train::Batch& batch) override {
    const parallel::pipeline::BlockRange range = stage_.chunk_blocks(chunk);
    Tensor x = stage_.first_chunk(chunk) ? embed(batch.input) : input;
    for (int64_t i = range.begin; i < range.end; ++i) {
      nn::enter_dropout_unit(i + 1);  // block i's masks, whichever stage runs it
      x = blocks_->at<ParallelBlock>(size_t(slots_[size_t(i)]))->forward(x);
    }
    if (!stage_.last_chunk(chunk)) return x;
    // Under sequence parallelism: this rank's positions' mean loss.
    return head_->loss(ln_f_->forward(x), sp_.take(batch.target, 1));
  }

 private:
  // Under the paper's sequence parallelism (parallel.sequence > 1) this rank embeds only its
  // positions, looked up at their global index; attention, built by the factories, crosses the
  // ranks. Off, take() is the identity and positions() is 0..T-1.
  Tensor embed(const Tensor& ids) {
    nn::enter_dropout_unit(0);
    sp_.check_length("ParallelBlockLM", ids.size(1));
    const Tensor pos = sp_.positions(ids.size(1), ids.device());
    return drop_->forward(wte_->forward(sp_.take(ids, 1)) + wpe_->forward(pos));
  }

  LmConfig config_;
  nn::SequenceShard sp_;
  nn::PipelineStage stage_;
  std::shared_ptr<nn::Embedding> wte_, wpe_;
  std::shared_ptr<nn::Dropout> drop_;
  std::shared_ptr<nn::ModuleList> blocks_;
  std::vector<int64_t> slots_;
  std::shared_ptr<nn::LayerNorm> ln_f_;
  std::shared_ptr<nn::LMHead> head_;
};

// The run's configuration: the trainer's sections, with model.type custom and this model's keys.
json default_config() {
  return {{"model", {{"type", "custom"}, {"n_layers", 4}, {"d_model", 64}, {"n_heads", 4}}},
          {"train", {{"steps", 200}, {"batch_size", 8}, {"seq_len", 64}, {"eval_every", 100}}},
          {"optimizer", {{"type", "adamw"}, {"lr", 3e-3}}},
          {"schedule", {{"type", "cosine"}, {"warmup_steps", 20}}},
          {"logging", {{"log_every", 20}}}};
}

}  // namespace

int main(int argc, char** argv) {
  return parallel::run_distributed(argc, argv, [&](const std::shared_ptr<parallel::Communicator>& world) {
    train::TrainConfig config;
    train::run_agreed(world.get(), [&] {
      json j = default_config();
      for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        TS_CHECK(arg == "--set" && i + 1 < argc, "usage",
                 "parallel_block_lm [--set key=value ...], got '", arg, "'");
        train::apply_override(j, argv[++i]);
      }
      config = train::TrainConfig::from_json(j);
    });

    train::ModelRecipe recipe;
    recipe.name = "parallel-block LM";
    recipe.build = [](const nn::BuildContext& ctx, const json& options) {
      return std::make_shared<ParallelBlockLM>(LmConfig::from_json(options), ctx);
    };
    recipe.loss = [](nn::Module& model, const train::Batch& b) {
      return static_cast<ParallelBlockLM&>(model).loss(b.input, b.target);
    };
    recipe.train_data = [&](const train::DataShard& s) { return train::lm_batches(config, s); };
    recipe.val_data = [&](const train::DataShard& s) { return train::lm_batches(config, s, true); };
    recipe.units_per_item = config.seq_len();
    recipe.unit = "tok";

    train::Engine engine(config, recipe, world, {.out = world->rank() == 0 ? &std::cout : nullptr});
    engine.fit();
    return 0;
  });
}

// GPT-2 style decoder: token + learned position embeddings, dropout, N pre-LN causal blocks, a
// final LayerNorm and an LM head tied to the token embedding. Written once, serially, through the
// models/nn factories; parameter names follow GPT-2 (wte, wpe, h.N.attn.c_attn, ln_f, lm_head).
#pragma once

#include <functional>
#include <memory>

#include "core/generator.h"
#include "models/gpt/gpt_config.h"
#include "models/nn/nn.h"
#include "models/nn/parallel/sequence_1d.h"
#include "models/nn/parallel/split_2d.h"
#include "models/nn/pipeline_stage.h"
#include "models/nn/sequence_shard.h"

namespace tessera::gpt {

class GPT : public nn::Module {
 public:
  // Weights drawn from gen as GPT-2 does: N(0, init_std) for embeddings and linears, the two
  // residual projections of each block N(0, init_std / sqrt(2 * n_layers)), zero biases, unit
  // LayerNorm gains.
  // Under a context with tensor parallelism the layers are their 1D or 2D twins (factory.h),
  // holding the shards of the weights the serial GPT draws from the same generator (2D: the hidden
  // states between the layers are this rank's block (B / q, T, C / q)). Under pipeline parallelism
  // this rank builds only its stages' layers (pipeline_stage.h), with the serial model's weights.
  GPT(const GPTConfig& config, const nn::BuildContext& ctx);
  std::string type_name() const override { return "GPT"; }

  // ids (B, T) i32/i64 with T <= context_length -> logits (B, T, vocab_size). Under sequence
  // parallelism outside training a T not divisible by the tensor size is padded (see gpt.cc), and
  // under 2D tensor parallelism a B not divisible by the grid side.
  Tensor forward(const Tensor& ids);
  // The final hidden states before the head: (B, T) ids -> (B, T, d_model); under sequence
  // parallelism this rank's shard (B, T/P, d_model), T divisible by P; under 2D its block.
  Tensor hidden(const Tensor& ids);
  // Mean cross-entropy of forward(ids) against targets (B, T) (-100 entries are ignored).
  Tensor loss(const Tensor& ids, const Tensor& targets);

  // Pipeline parallelism: local model chunk `chunk`'s part of the forward. input: the ids (B, T)
  // on global stage 0, else the previous stage's hidden states (B, T, C). Returns the hidden
  // states, or on the last stage the mean loss against targets (undefined targets: the logits).
  // Serially (one stage) stage_forward(0, ids, targets) is loss(ids, targets).
  Tensor stage_forward(int chunk, const Tensor& input, const Tensor& targets);
  const nn::PipelineStage& stage() const { return stage_; }
  // Rows of id 0 a batch of b rows needs outside training so that it splits where the layout cuts
  // the batch (2D / 2.5D over the grid rows, 3D over the cube side); 0 otherwise. forward() adds
  // them itself; a pipelined caller of stage_forward adds them and drops their outputs.
  int64_t batch_padding(int64_t b) const;
  // What a window's length must be a multiple of where the layout splits the positions (Megatron's
  // sequence parallelism, the paper's: 2S in the zigzag layout); 1 otherwise. forward() pads to
  // it outside training; a pipelined caller of stage_forward pads itself.
  int64_t window_multiple() const;
  // Appends max_new_tokens tokens to ids (B, T0) and returns them all (B, T0 + max_new_tokens) i64.
  // Each step looks at the last context_length tokens. temperature 0 picks the most likely token
  // (greedy, the first of ties); otherwise a token is drawn from softmax(logits / temperature)
  // restricted to the top_k most likely (top_k <= 0: all), one uniform draw per row from gen.
  // Runs without gradients and in eval mode (the training flag is restored).
  // next_logits(window (B, W)) gives the last position's logits (B, V); by default forward()'s.
  // A pipelined model passes one that runs the stages and shares the last stage's logits.
  using NextLogits = std::function<Tensor(const Tensor& window)>;
  Tensor generate(const Tensor& ids, int64_t max_new_tokens, double temperature, int64_t top_k,
                  Generator& gen, const NextLogits& next_logits = {});

  const GPTConfig& config() const { return config_; }
  const std::shared_ptr<nn::Embedding>& wte() const { return wte_; }
  const std::shared_ptr<nn::Embedding>& wpe() const { return wpe_; }
  const std::shared_ptr<nn::ModuleList>& blocks() const { return h_; }
  const std::shared_ptr<nn::LayerNorm>& ln_f() const { return ln_f_; }
  const std::shared_ptr<nn::LMHead>& lm_head() const { return lm_head_; }

 private:
  GPTConfig config_;
  std::shared_ptr<nn::Embedding> wte_, wpe_;
  std::shared_ptr<nn::Dropout> drop_;
  std::shared_ptr<nn::ModuleList> h_;
  std::shared_ptr<nn::LayerNorm> ln_f_;
  std::shared_ptr<nn::LMHead> lm_head_;
  nn::SequenceSplit seq_;  // off unless parallel.tensor.sequence_parallel
  nn::Split2D split2d_;    // off unless parallel.tensor.mode 2d
  int64_t cube_side_ = 1;  // parallel.tensor.mode 3d: the cube side q, which cuts the batch
  nn::SequenceShard sp_;   // off unless parallel.sequence > 1 (the paper's sequence parallelism)
  nn::PipelineStage stage_;
  std::vector<int64_t> block_slot_;  // global block index -> position in h_ (-1: not held)

  Tensor embed(const Tensor& ids);
  Tensor sequence_forward(const Tensor& ids);
  // Sequence parallel, outside training: every rank's positions' logits (B, T/S, V) gathered in
  // order into (B, T, V) on every rank.
  Tensor gather_positions(const Tensor& logits);
  Tensor run_blocks(Tensor x, int64_t begin, int64_t end);
};

// Picks the next token from one row of logits (V), as generate() does; u is a uniform draw in
// [0, 1) (unused when temperature is 0). Exposed for tests.
int64_t sample_token(const std::vector<float>& logits, double temperature, int64_t top_k, double u);

}  // namespace tessera::gpt

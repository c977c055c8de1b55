// The transformer block: pre-LN (GPT-2, ViT: x + attn(ln_1(x)), then x + mlp(ln_2(x))) or post-LN
// (BERT: ln_1(x + attn(x)), then ln_2(x + mlp(x))), with optional activation checkpointing. Under
// 1D sequence parallelism (models/nn/parallel/sequence_1d.h) its input and output are this rank's
// sequence shard (B, T/P, C): the LayerNorms and residual dropouts work on shards, attention and
// the MLP gather the sequence in their column linears and scatter it again in their row linears.
#pragma once

#include <memory>
#include <string>

#include "core/generator.h"
#include "models/nn/build_context.h"
#include "models/nn/attention.h"
#include "models/nn/layer_norm.h"
#include "models/nn/mlp.h"

namespace tessera::nn {

struct BlockSpec {
  int64_t d_model = 0;
  int64_t n_heads = 1;
  int64_t mlp_hidden = 0;  // 0: 4 * d_model
  bool causal = false;     // decoder (GPT) or bidirectional (BERT, ViT)
  bool pre_ln = true;      // false: BERT's post-LN order
  double ln_eps = 1e-5;
  std::string gelu = "tanh";  // "tanh" (GPT-2) or "none" (erf: BERT, ViT)
  bool bias = true;
  double dropout = 0.0;       // residual dropout after attention and MLP
  double attn_dropout = 0.0;  // on attention probabilities
  double init_std = 0.02;
  int64_t residual_layers = 0;  // > 0: both residual projections drawn with init_std / sqrt(2 L)
  // Recompute this block's activations in backward instead of keeping them (same gradients).
  bool checkpoint = false;
};

class Block : public Module {
 public:
  // Children, in order: ln_1, attn, ln_2, mlp (GPT-2's names), built through the factories.
  Block(const BlockSpec& spec, const BuildContext& ctx);
  std::string type_name() const override { return "Block"; }

  // x (B, T, C); key_padding_mask (B, T) bool, true = attend, or undefined -> (B, T, C).
  // Sequence parallel: x and the result (B, T/P, C); the mask stays (B, T).
  virtual Tensor forward(const Tensor& x, const Tensor& key_padding_mask = Tensor());

  const BlockSpec& spec() const { return spec_; }
  void set_checkpoint(bool on) { spec_.checkpoint = on; }
  const std::shared_ptr<LayerNorm>& ln_1() const { return ln_1_; }
  const std::shared_ptr<MultiHeadAttention>& attn() const { return attn_; }
  const std::shared_ptr<LayerNorm>& ln_2() const { return ln_2_; }
  const std::shared_ptr<MLP>& mlp() const { return mlp_; }

 private:
  Tensor forward_layers(const Tensor& x, const Tensor& key_padding_mask);

  BlockSpec spec_;
  std::shared_ptr<LayerNorm> ln_1_;
  std::shared_ptr<MultiHeadAttention> attn_;
  std::shared_ptr<LayerNorm> ln_2_;
  std::shared_ptr<MLP> mlp_;
};

}  // namespace tessera::nn

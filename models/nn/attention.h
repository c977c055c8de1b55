// Multi-head self-attention as in GPT-2: one fused projection c_attn (C -> 3C, laid out q | k | v,
// each split into heads by views), the fused scaled_dot_product_attention op (causal for decoders,
// key-padding-masked for BERT), and the output projection c_proj with residual dropout.
#pragma once

#include <memory>

#include "core/generator.h"
#include "models/nn/build_context.h"
#include "models/nn/dropout.h"
#include "models/nn/linear.h"
#include "models/nn/sequence_shard.h"

namespace tessera::nn {

struct AttentionSpec {
  int64_t d_model = 0;
  int64_t n_heads = 1;
  bool bias = true;
  bool causal = false;
  double attn_dropout = 0.0;   // on the attention probabilities (training only)
  double resid_dropout = 0.0;  // on the output projection (training only)
  double init_std = 0.02;
  // > 0: c_proj is drawn with init_std / sqrt(2 * residual_layers) (GPT-2's residual scaling).
  int64_t residual_layers = 0;
};

// How a tensor-parallel twin splits the layer: heads into `head_parts` equal groups of which this
// rank computes group `head_index`, and (2D) the batch into `batch_parts` chunks of which its
// input holds chunk `batch_index`. All 1: the serial layer.
struct AttentionSplit {
  int head_parts = 1;
  int head_index = 0;
  int batch_parts = 1;
  int batch_index = 0;
};

class MultiHeadAttention : public Module {
 public:
  // Builds c_attn with make_linear(ParallelStyle::column) and c_proj with ParallelStyle::row.
  // Under 1D tensor parallelism this rank computes n_heads / P of the heads.
  MultiHeadAttention(const AttentionSpec& spec, const BuildContext& ctx);
  std::string type_name() const override { return "MultiHeadAttention"; }

  // x (B, T, C); key_padding_mask (B, T) bool, true = attend, or undefined -> (B, T, C). A twin
  // splitting the batch takes its chunk (B / parts, T, ...) with the whole batch's mask.
  virtual Tensor forward(const Tensor& x, const Tensor& key_padding_mask = Tensor());

  const std::shared_ptr<Linear>& c_attn() const { return c_attn_; }
  const std::shared_ptr<Linear>& c_proj() const { return c_proj_; }
  const AttentionSpec& spec() const { return spec_; }
  const AttentionSplit& split() const { return split_; }

 protected:
  // For twins: the linears from the factories (whatever their twin), heads and batch split by
  // `split`. Attention dropout draws the whole layer's mask at this rank's heads and batch rows.
  MultiHeadAttention(const AttentionSpec& spec, const BuildContext& ctx,
                     const AttentionSplit& split);

 private:
  AttentionSpec spec_;
  AttentionSplit split_;
  SequenceShard sequence_;  // parallel.sequence > 1: x holds this rank's positions
  int64_t local_heads_ = 0;  // heads this rank computes (all of them when serial)
  std::shared_ptr<Linear> c_attn_, c_proj_;
  std::shared_ptr<Dropout> resid_dropout_;
};

// The std of a residual output projection: init_std / sqrt(2 * layers), or init_std when layers <=
// 0.
double residual_init_std(double init_std, int64_t layers);

}  // namespace tessera::nn

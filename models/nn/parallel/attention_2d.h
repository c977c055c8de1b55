// 2D (SUMMA) tensor-parallel multi-head attention, on the 2D activation layout
// (parallel/tensor/summa.h): rank (grid row r, column s) takes the block (B / q, T, C / q) of x,
// batch chunk r and features chunk s, and gives the same block of the output.
//   c_attn  Linear2D with fused q | k | v (linear_2d.h): its output block (B / q, T, 3 C / q) is
//           the features chunk s of each of q, k and v, which are heads [s H / q, (s + 1) H / q)
//   heads   this rank's H / q heads on its batch chunk; key_padding_mask (B, T) is cut to the
//           chunk's rows; attention dropout draws the serial layer's mask at these heads and rows
//   c_proj  Linear2D: the heads' outputs (B / q, T, C / q), features chunk s, are its input block
// Needs n_heads and a batch divisible by q (and d_model by q^2, for the Linear2D biases).
// Under 2.5D the same on each depth layer's batch slice: batch chunk batch_index() of d q
// (summa.h). Communication: that of the two Linear2D; the attention itself is local.
#pragma once

#include "models/nn/attention.h"
#include "models/nn/build_context.h"

namespace tessera::nn {

class MultiHeadAttention2D final : public MultiHeadAttention {
 public:
  // ctx must be tensor-parallel in mode 2d or 2.5d.
  MultiHeadAttention2D(const AttentionSpec& spec, const BuildContext& ctx);
  std::string type_name() const override { return "MultiHeadAttention2D"; }
};

}  // namespace tessera::nn

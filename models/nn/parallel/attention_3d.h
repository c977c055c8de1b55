// 3D tensor-parallel multi-head attention on the 3D activation layout
// (parallel/tensor/cube_3d.h): rank (i, j, k) takes the piece (B / q, T, C / q^2) of x, batch
// chunk i and features chunk k q + j, and gives the same piece of the output.
//   c_attn  Linear3D with fused q | k | v (linear_3d.h): its output (B / q, T, 3 C / q^2) is the
//           features chunk k q + j of each of q, k and v, which are heads
//           [(k q + j) H / q^2, (k q + j + 1) H / q^2)
//   heads   this rank's H / q^2 heads on its batch chunk; key_padding_mask (B, T) is cut to the
//           chunk's rows; attention dropout draws the serial layer's mask at these heads and rows
//   c_proj  Linear3D: the heads' outputs (B / q, T, C / q^2), features chunk k q + j, are its input
// Needs n_heads divisible by q^2, a batch by q (and d_model by q^3, for the Linear3D biases).
// Communication: that of the two Linear3D; the attention itself is local.
#pragma once

#include "models/nn/attention.h"
#include "models/nn/build_context.h"

namespace tessera::nn {

class MultiHeadAttention3D final : public MultiHeadAttention {
 public:
  // ctx must be tensor-parallel in mode 3d.
  MultiHeadAttention3D(const AttentionSpec& spec, const BuildContext& ctx);
  std::string type_name() const override { return "MultiHeadAttention3D"; }
};

}  // namespace tessera::nn

// 3D tensor-parallel ViT patch embedding: the serial layer's patches and Linear on the 3D
// activation layout (parallel/tensor/cube_3d.h). Every rank takes the whole batch of images, as
// the serial layer does; rank (i, j, k) flattens the patches (B, N, C_in P^2) and keeps its piece
// (batch chunk i, features chunk k q + j: split_3d), which the proj (a Linear3D, the factories'
// twin) takes: its output is this rank's piece (B / q, N, D / q^2). The weight layout is the
// serial one's (patch_embedding.h), cut as a Linear3D's. Needs C_in P^2 divisible by q^2, D by q^3
// (the bias) and the batch by q. Communication: the Linear3D's.
#pragma once

#include "models/nn/build_context.h"
#include "models/nn/patch_embedding.h"
#include "parallel/tensor/cube_3d.h"

namespace tessera::nn {

class PatchEmbedding3D final : public PatchEmbedding {
 public:
  // ctx must be tensor-parallel in mode 3d.
  PatchEmbedding3D(const PatchEmbeddingSpec& spec, const BuildContext& ctx);
  std::string type_name() const override { return "PatchEmbedding3D"; }
  // x (B, C_in, H, W), the whole batch -> this rank's piece (B / q, N, D / q^2)
  Tensor forward(const Tensor& x) override;

 private:
  parallel::tensor::Cube3D cube_;
};

}  // namespace tessera::nn

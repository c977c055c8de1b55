// 2D (SUMMA) tensor-parallel ViT patch embedding: the serial layer's patches and Linear, on the 2D
// activation layout (parallel/tensor/summa.h). Every rank takes the whole batch of images, as the
// serial layer does; rank (grid row r, column s) cuts its batch chunk r, flattens its patches
// (B / q, N, C_in P^2) and keeps their features chunk s, the 2D block the proj (a Linear2D, the
// factories' twin) takes: its output is this rank's block (B / q, N, D / q). The weight layout is
// the serial one's (patch_embedding.h), cut as a Linear2D's. Needs C_in P^2 and the batch
// divisible by q (2.5D: the batch by d q), D by q^2. Communication: the Linear2D's.
#pragma once

#include "models/nn/build_context.h"
#include "models/nn/patch_embedding.h"
#include "parallel/tensor/summa.h"

namespace tessera::nn {

class PatchEmbedding2D final : public PatchEmbedding {
 public:
  // ctx must be tensor-parallel in mode 2d or 2.5d.
  PatchEmbedding2D(const PatchEmbeddingSpec& spec, const BuildContext& ctx);
  std::string type_name() const override { return "PatchEmbedding2D"; }
  // x (B, C_in, H, W), the whole batch -> this rank's block (B / q, N, D / q)
  Tensor forward(const Tensor& x) override;

 private:
  parallel::tensor::SummaGrid grid_;
};

}  // namespace tessera::nn

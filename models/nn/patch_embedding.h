// ViT patch embedding: an image (B, C_in, H, W) cut into non-overlapping P x P patches, each
// flattened and projected by one Linear: (B, N = (H/P)(W/P), D), patches in row-major order. This
// equals torch.nn.Conv2d(C_in, D, kernel_size = P, stride = P) followed by flatten(2).transpose(1,
// 2).
//
// Weight layout: proj.weight is (D, C_in * P * P) with the input index c * P * P + i * P + j for
// channel c, patch row i, patch column j, i.e. exactly a Conv2d weight (D, C_in, P, P) reshaped to
// (D, C_in * P * P); proj.bias (D) is the Conv2d bias. A Conv2d checkpoint loads by that reshape.
#pragma once

#include <memory>

#include "core/generator.h"
#include "models/nn/build_context.h"
#include "models/nn/linear.h"

namespace tessera::nn {

struct PatchEmbeddingSpec {
  int64_t image_height = 0;
  int64_t image_width = 0;
  int64_t patch_size = 0;
  int64_t in_channels = 3;
  int64_t embed_dim = 0;
  bool bias = true;
  double init_std = 0.02;
};

class PatchEmbedding : public Module {
 public:
  PatchEmbedding(const PatchEmbeddingSpec& spec, const BuildContext& ctx);
  std::string type_name() const override { return "PatchEmbedding"; }

  // x (B, C_in, H, W) -> (B, N, D)
  virtual Tensor forward(const Tensor& x);

  int64_t num_patches() const;
  const std::shared_ptr<Linear>& proj() const { return proj_; }
  const PatchEmbeddingSpec& spec() const { return spec_; }

 protected:
  // x (B, C_in, H, W) checked -> its flattened patches (B, N, C_in * P * P), the proj's input.
  Tensor patches(const Tensor& x) const;

 private:
  PatchEmbeddingSpec spec_;
  std::shared_ptr<Linear> proj_;
};

}  // namespace tessera::nn

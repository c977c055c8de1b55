// Patch embedding by unfold + linear (see patch_embedding.h for the weight layout).
#include "models/nn/patch_embedding.h"

#include "autograd/ops.h"
#include "models/nn/factory.h"

namespace tessera::nn {

PatchEmbedding::PatchEmbedding(const PatchEmbeddingSpec& spec, const BuildContext& ctx) : spec_(spec) {
  const int64_t p = spec.patch_size;
  TS_CHECK(p > 0 && spec.image_height > 0 && spec.image_width > 0 && spec.image_height % p == 0 &&
               spec.image_width % p == 0,
           "PatchEmbedding", "expected an image size divisible by the patch size, got ",
           spec.image_height, "x", spec.image_width, " with patch ", p);
  TS_CHECK(spec.in_channels > 0 && spec.embed_dim > 0, "PatchEmbedding",
           "expected positive in_channels and embed_dim, got ", spec.in_channels, " and ",
           spec.embed_dim);
  proj_ = register_module("proj", make_linear({.in_features = spec.in_channels * p * p,
                                               .out_features = spec.embed_dim,
                                               .bias = spec.bias,
                                               .init_std = spec.init_std},
                                              ctx));
}

int64_t PatchEmbedding::num_patches() const {
  return (spec_.image_height / spec_.patch_size) * (spec_.image_width / spec_.patch_size);
}

Tensor PatchEmbedding::forward(const Tensor& x) {
  return proj_->forward(patches(x));  // (B, N, D)
}

Tensor PatchEmbedding::patches(const Tensor& x) const {
  const int64_t c = spec_.in_channels, p = spec_.patch_size;
  const int64_t hp = spec_.image_height / p, wp = spec_.image_width / p;
  TS_CHECK(x.defined() && x.dim() == 4 && x.size(1) == c && x.size(2) == spec_.image_height &&
               x.size(3) == spec_.image_width,
           "PatchEmbedding", "expected images (B, ", c, ", ", spec_.image_height, ", ",
           spec_.image_width, "), got ", x.defined() ? x.describe() : "undefined");
  const int64_t b = x.size(0);
  // (B, C, Hp, P, Wp, P) -> (B, Hp, Wp, C, P, P): one row per patch in the Conv2d weight's order.
  Tensor patches = permute(reshape(x, {b, c, hp, p, wp, p}), {0, 2, 4, 1, 3, 5});
  return reshape(patches, {b, hp * wp, c * p * p});  // (B, N, C * P * P)
}

}  // namespace tessera::nn

// 3D tensor-parallel patch embedding (see patch_embedding_3d.h).
#include "models/nn/parallel/patch_embedding_3d.h"

#include "core/error.h"
#include "models/nn/parallel/linear_3d.h"

namespace tessera::nn {
namespace {

// Checked before the proj (a Linear3D) is built, so the message names the patch's features.
const PatchEmbeddingSpec& checked(const PatchEmbeddingSpec& spec, const BuildContext& ctx) {
  const int64_t q = ctx.cube("PatchEmbedding3D").q(), q2 = q * q;
  const int64_t features = spec.in_channels * spec.patch_size * spec.patch_size;
  TS_CHECK(features % q2 == 0, "PatchEmbedding3D", "expected a patch's features (in_channels ",
           spec.in_channels, " x patch_size ", spec.patch_size, "^2 = ", features,
           ") divisible by q^2 = ", q2, " (the 3D cube side q = ", q, ")");
  return spec;
}

}  // namespace

PatchEmbedding3D::PatchEmbedding3D(const PatchEmbeddingSpec& spec, const BuildContext& ctx)
    : PatchEmbedding(checked(spec, ctx), ctx), cube_(ctx.cube("PatchEmbedding3D")) {}

Tensor PatchEmbedding3D::forward(const Tensor& x) {
  TS_CHECK(x.defined() && x.dim() == 4 && x.size(0) % cube_.q() == 0, type_name(),
           "expected images (B, C, H, W) with the batch B divisible by the 3D cube side q = ",
           cube_.q(), ", got ", x.defined() ? x.describe() : "undefined");
  // As region ops, so an input that requires grad gets the whole gradient back.
  return proj()->forward(parallel::tensor::split_3d(patches(x), cube_));
}

}  // namespace tessera::nn

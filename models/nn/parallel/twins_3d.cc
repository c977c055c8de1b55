// The 3D row of the twin table (see layer_twins.h), for mode 3d: every layer split over the
// q x q x q cube whatever the hint (which the twins check and keep), the activations between
// layers pieces (B / q, T, C / q^2) of the residual stream (parallel/tensor/cube_3d.h).
#include "models/nn/layer_twins.h"
#include "models/nn/parallel/attention_3d.h"
#include "models/nn/parallel/classifier_3d.h"
#include "models/nn/parallel/layer_norm_3d.h"
#include "models/nn/parallel/linear_3d.h"
#include "models/nn/parallel/patch_embedding_3d.h"
#include "models/nn/parallel/vocab_3d.h"

namespace tessera::nn {
namespace {

std::shared_ptr<Linear> linear_3d(const LinearSpec& spec, const BuildContext& ctx,
                                  ParallelStyle style) {
  return std::make_shared<Linear3D>(spec, ctx, style);
}

std::shared_ptr<Linear> classifier_3d(const LinearSpec& spec, const BuildContext& ctx) {
  return std::make_shared<Classifier3D>(spec, ctx);
}

std::shared_ptr<LayerNorm> layer_norm_3d(const LayerNormSpec& spec, const BuildContext& ctx) {
  return std::make_shared<LayerNorm3D>(spec, ctx);
}

std::shared_ptr<Embedding> embedding_3d(const EmbeddingSpec& spec, const BuildContext& ctx,
                                        ParallelStyle style) {
  if (style == ParallelStyle::vocab)
    return std::make_shared<VocabParallelEmbedding3D>(spec, ctx, style);
  return std::make_shared<Embedding3D>(spec, ctx, style);
}

std::shared_ptr<MultiHeadAttention> attention_3d(const AttentionSpec& spec,
                                                 const BuildContext& ctx) {
  return std::make_shared<MultiHeadAttention3D>(spec, ctx);
}

std::shared_ptr<PatchEmbedding> patch_embedding_3d(const PatchEmbeddingSpec& spec,
                                                   const BuildContext& ctx) {
  return std::make_shared<PatchEmbedding3D>(spec, ctx);
}

std::shared_ptr<LMHead> lm_head_3d(const LMHeadSpec& spec, const BuildContext& ctx,
                                   ParallelStyle style) {
  return std::make_shared<VocabParallelLMHead3D>(spec, ctx, style);
}

std::shared_ptr<LMHead> tied_lm_head_3d(const LMHeadSpec& spec, const Embedding& embedding,
                                        const BuildContext& ctx, ParallelStyle style) {
  auto* pieces = dynamic_cast<const VocabParallelEmbedding3D*>(&embedding);
  TS_CHECK(pieces != nullptr, "make_tied_lm_head",
           "expected a VocabParallelEmbedding3D (make_embedding with ParallelStyle vocab) to "
           "tie to under tensor parallelism mode 3d, got ",
           embedding.type_name());
  return std::make_shared<VocabParallelLMHead3D>(spec, *pieces, ctx, style);
}

std::optional<DropoutChunk> residual_block_3d(const BuildContext& ctx) {
  return dropout_chunk_3d(ctx.cube("residual_dropout_chunk"));
}

}  // namespace

const LayerTwins& twins_3d() {
  static const LayerTwins row{.linear = linear_3d,
                              .classifier = classifier_3d,
                              .layer_norm = layer_norm_3d,
                              .embedding = embedding_3d,
                              .attention = attention_3d,
                              .patch_embedding = patch_embedding_3d,
                              .lm_head = lm_head_3d,
                              .tied_lm_head = tied_lm_head_3d,
                              .residual_block = residual_block_3d};
  return row;
}

}  // namespace tessera::nn

// The 2D row of the twin table (see layer_twins.h), for modes 2d and 2.5d: every layer split over
// the q x q grid whatever the hint (which the twins check and keep), the activations between
// layers blocks (B / q, T, C / q) of the residual stream (parallel/tensor/summa.h).
#include "models/nn/layer_twins.h"
#include "models/nn/parallel/attention_2d.h"
#include "models/nn/parallel/classifier_2d.h"
#include "models/nn/parallel/layer_norm_2d.h"
#include "models/nn/parallel/linear_2d.h"
#include "models/nn/parallel/patch_embedding_2d.h"
#include "models/nn/parallel/placement_2d.h"
#include "models/nn/parallel/vocab_2d.h"

namespace tessera::nn {
namespace {

std::shared_ptr<Linear> linear_2d(const LinearSpec& spec, const BuildContext& ctx,
                                  ParallelStyle style) {
  return std::make_shared<Linear2D>(spec, ctx, style);
}

std::shared_ptr<Linear> classifier_2d(const LinearSpec& spec, const BuildContext& ctx) {
  return std::make_shared<Classifier2D>(spec, ctx);
}

std::shared_ptr<LayerNorm> layer_norm_2d(const LayerNormSpec& spec, const BuildContext& ctx) {
  return std::make_shared<LayerNorm2D>(spec, ctx);
}

std::shared_ptr<Embedding> embedding_2d(const EmbeddingSpec& spec, const BuildContext& ctx,
                                        ParallelStyle style) {
  if (style == ParallelStyle::vocab)
    return std::make_shared<VocabParallelEmbedding2D>(spec, ctx, style);
  return std::make_shared<Embedding2D>(spec, ctx, style);
}

std::shared_ptr<MultiHeadAttention> attention_2d(const AttentionSpec& spec,
                                                 const BuildContext& ctx) {
  return std::make_shared<MultiHeadAttention2D>(spec, ctx);
}

std::shared_ptr<PatchEmbedding> patch_embedding_2d(const PatchEmbeddingSpec& spec,
                                                   const BuildContext& ctx) {
  return std::make_shared<PatchEmbedding2D>(spec, ctx);
}

std::shared_ptr<LMHead> lm_head_2d(const LMHeadSpec& spec, const BuildContext& ctx,
                                   ParallelStyle style) {
  return std::make_shared<VocabParallelLMHead2D>(spec, ctx, style);
}

std::shared_ptr<LMHead> tied_lm_head_2d(const LMHeadSpec& spec, const Embedding& embedding,
                                        const BuildContext& ctx, ParallelStyle style) {
  auto* blocks = dynamic_cast<const VocabParallelEmbedding2D*>(&embedding);
  TS_CHECK(blocks != nullptr, "make_tied_lm_head",
           "expected a VocabParallelEmbedding2D (make_embedding with ParallelStyle vocab) to "
           "tie to under tensor parallelism mode '",
           ctx.tensor_mode_name(), "', got ", embedding.type_name());
  return std::make_shared<VocabParallelLMHead2D>(spec, *blocks, ctx, style);
}

std::optional<DropoutChunk> residual_block_2d(const BuildContext& ctx) {
  return dropout_chunk_2d(ctx.summa_grid());
}

}  // namespace

const LayerTwins& twins_2d() {
  static const LayerTwins row{.linear = linear_2d,
                              .classifier = classifier_2d,
                              .layer_norm = layer_norm_2d,
                              .embedding = embedding_2d,
                              .attention = attention_2d,
                              .patch_embedding = patch_embedding_2d,
                              .lm_head = lm_head_2d,
                              .tied_lm_head = tied_lm_head_2d,
                              .residual_block = residual_block_2d};
  return row;
}

}  // namespace tessera::nn

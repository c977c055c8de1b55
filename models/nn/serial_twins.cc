// The serial row of the twin table (see layer_twins.h): the layers themselves, which keep the
// ParallelStyle hint they were asked with (parallel_style()) so tests pin each call site.
#include "models/nn/layer_twins.h"

namespace tessera::nn {
namespace {

std::shared_ptr<Linear> linear(const LinearSpec& spec, const BuildContext& ctx,
                               ParallelStyle style) {
  return std::make_shared<Linear>(spec, ctx.generator(), style);
}

std::shared_ptr<Linear> classifier(const LinearSpec& spec, const BuildContext& ctx) {
  return std::make_shared<Linear>(spec, ctx.generator(), ParallelStyle::none);
}

std::shared_ptr<LayerNorm> layer_norm(const LayerNormSpec& spec, const BuildContext&) {
  return std::make_shared<LayerNorm>(spec);
}

std::shared_ptr<Embedding> embedding(const EmbeddingSpec& spec, const BuildContext& ctx,
                                     ParallelStyle style) {
  return std::make_shared<Embedding>(spec, ctx.generator(), style);
}

std::shared_ptr<MultiHeadAttention> attention(const AttentionSpec& spec, const BuildContext& ctx) {
  return std::make_shared<MultiHeadAttention>(spec, ctx);
}

std::shared_ptr<PatchEmbedding> patch_embedding(const PatchEmbeddingSpec& spec,
                                                const BuildContext& ctx) {
  return std::make_shared<PatchEmbedding>(spec, ctx);
}

std::shared_ptr<LMHead> lm_head(const LMHeadSpec& spec, const BuildContext& ctx,
                                ParallelStyle style) {
  return std::make_shared<LMHead>(spec, ctx.generator(), style);
}

std::shared_ptr<LMHead> tied_lm_head(const LMHeadSpec& spec, const Embedding& embedding,
                                     const BuildContext&, ParallelStyle style) {
  return std::make_shared<LMHead>(spec, embedding.weight(), style);
}

std::optional<DropoutChunk> whole_stream(const BuildContext&) { return std::nullopt; }

}  // namespace

const LayerTwins& serial_twins() {
  static const LayerTwins row{.linear = linear,
                              .classifier = classifier,
                              .layer_norm = layer_norm,
                              .embedding = embedding,
                              .attention = attention,
                              .patch_embedding = patch_embedding,
                              .lm_head = lm_head,
                              .tied_lm_head = tied_lm_head,
                              .residual_block = whole_stream};
  return row;
}

}  // namespace tessera::nn

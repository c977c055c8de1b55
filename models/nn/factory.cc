// Layer factories (see factory.h): check the parallel hint, then build what the row of the twin
// table for the context's tensor mode names (layer_twins.h).
#include "models/nn/factory.h"

#include <initializer_list>

#include "models/nn/layer_twins.h"
#include "models/nn/parallel/sequence_1d.h"
#include "models/nn/sequence_shard.h"

namespace tessera::nn {

namespace {

void check_style(const char* factory, ParallelStyle style,
                 std::initializer_list<ParallelStyle> allowed) {
  std::string names;
  bool ok = false;
  for (ParallelStyle a : allowed) {
    ok |= a == style;
    names += (names.empty() ? "" : ", ") + parallel_style_name(a);
  }
  TS_CHECK(ok, factory, "expected ParallelStyle ", names, ", got ", parallel_style_name(style));
}

}  // namespace

std::shared_ptr<Linear> make_linear(const LinearSpec& spec, const BuildContext& ctx,
                                    ParallelStyle style) {
  check_style("make_linear", style,
              {ParallelStyle::none, ParallelStyle::column, ParallelStyle::row});
  return layer_twins(ctx).linear(spec, ctx, style);
}

std::shared_ptr<Linear> make_classifier(const LinearSpec& spec, const BuildContext& ctx) {
  return layer_twins(ctx).classifier(spec, ctx);
}

std::shared_ptr<LayerNorm> make_layer_norm(const LayerNormSpec& spec) {
  return std::make_shared<LayerNorm>(spec);
}

std::shared_ptr<LayerNorm> make_layer_norm(const LayerNormSpec& spec, const BuildContext& ctx) {
  return layer_twins(ctx).layer_norm(spec, ctx);
}

std::shared_ptr<Embedding> make_embedding(const EmbeddingSpec& spec, const BuildContext& ctx,
                                          ParallelStyle style) {
  check_style("make_embedding", style, {ParallelStyle::none, ParallelStyle::vocab});
  return layer_twins(ctx).embedding(spec, ctx, style);
}

DropoutChunk residual_dropout_chunk(const BuildContext& ctx) {
  const SequenceShard shard(ctx);
  const std::optional<DropoutChunk> block = layer_twins(ctx).residual_block(ctx);
  if (!block) return shard.on() ? shard.dropout_chunk() : SequenceSplit(ctx).dropout_chunk();
  if (!shard.on()) return *block;
  // The paper's sequence parallelism inside the grid: the sequence chunk along dim 1, the grid's
  // batch rows and feature columns around it.
  DropoutChunk c = shard.dropout_chunk();
  c.batch_parts = block->batch_parts;
  c.batch_index = block->batch_index;
  c.feature_parts = block->parts;
  c.feature_index = block->index;
  return c;
}

std::shared_ptr<Dropout> make_dropout(double p, const BuildContext& ctx) {
  return std::make_shared<Dropout>(p, residual_dropout_chunk(ctx));
}

std::shared_ptr<MultiHeadAttention> make_attention(const AttentionSpec& spec,
                                                   const BuildContext& ctx) {
  auto attn = layer_twins(ctx).attention(spec, ctx);
  // Its output projection's dropout acts on the residual stream: this rank's block of it (2D,
  // 3D) or its positions (sequence parallelism). A Block sets the same chunk; a model that builds
  // its own blocks gets it here.
  set_dropout_chunks(*attn, residual_dropout_chunk(ctx));
  return attn;
}

std::shared_ptr<MLP> make_mlp(const MLPSpec& spec, const BuildContext& ctx) {
  auto mlp = std::make_shared<MLP>(spec, ctx);  // its linears split under every mode
  // Its dropout acts on the residual stream: this rank's block of it (2D, 3D) or its positions
  // (sequence parallelism).
  set_dropout_chunks(*mlp, residual_dropout_chunk(ctx));
  return mlp;
}

std::shared_ptr<Block> make_block(const BlockSpec& spec, const BuildContext& ctx) {
  return std::make_shared<Block>(spec, ctx);  // its layers split under every mode
}

std::shared_ptr<PatchEmbedding> make_patch_embedding(const PatchEmbeddingSpec& spec,
                                                     const BuildContext& ctx) {
  return layer_twins(ctx).patch_embedding(spec, ctx);
}

std::shared_ptr<ClassificationHead> make_classification_head(const ClassificationHeadSpec& spec,
                                                             const BuildContext& ctx) {
  return std::make_shared<ClassificationHead>(spec, ctx);  // its layers split under 2d and 3d
}

std::shared_ptr<LMHead> make_lm_head(const LMHeadSpec& spec, const BuildContext& ctx,
                                     ParallelStyle style) {
  check_style("make_lm_head", style, {ParallelStyle::none, ParallelStyle::vocab});
  return layer_twins(ctx).lm_head(spec, ctx, style);
}

std::shared_ptr<LMHead> make_tied_lm_head(const LMHeadSpec& spec, const Tensor& tied_weight,
                                          ParallelStyle style) {
  check_style("make_tied_lm_head", style, {ParallelStyle::none, ParallelStyle::vocab});
  return std::make_shared<LMHead>(spec, tied_weight, style);
}

std::shared_ptr<LMHead> make_tied_lm_head(const LMHeadSpec& spec, const Embedding& embedding,
                                          const BuildContext& ctx, ParallelStyle style) {
  check_style("make_tied_lm_head", style, {ParallelStyle::none, ParallelStyle::vocab});
  return layer_twins(ctx).tied_lm_head(spec, embedding, ctx, style);
}

}  // namespace tessera::nn

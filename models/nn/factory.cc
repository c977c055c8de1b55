// Layer factories (see factory.h): validate the parallel hint, build the serial layer or its twin.
#include "models/nn/factory.h"

#include "models/nn/sequence_shard.h"

#include <initializer_list>

#include "models/nn/parallel/attention_2d.h"
#include "models/nn/parallel/attention_3d.h"
#include "models/nn/parallel/classifier_2d.h"
#include "models/nn/parallel/classifier_3d.h"
#include "models/nn/parallel/layer_norm_2d.h"
#include "models/nn/parallel/layer_norm_3d.h"
#include "models/nn/parallel/linear_1d.h"
#include "models/nn/parallel/linear_2d.h"
#include "models/nn/parallel/linear_3d.h"
#include "models/nn/parallel/patch_embedding_2d.h"
#include "models/nn/parallel/patch_embedding_3d.h"
#include "models/nn/parallel/placement_2d.h"
#include "models/nn/parallel/sequence_1d.h"
#include "models/nn/parallel/vocab_1d.h"
#include "models/nn/parallel/vocab_2d.h"
#include "models/nn/parallel/vocab_3d.h"

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

// The 1D, 2D, 2.5D and 3D twins exist today; another mode is refused by name.
bool one_d(const BuildContext& ctx, const char* factory) {
  if (!ctx.tensor_parallel() || ctx.tensor_2d() || ctx.tensor_3d()) return false;
  TS_CHECK(ctx.tensor_mode() == parallel::TensorMode::one_d, factory, "tensor parallelism mode '",
           ctx.tensor_mode_name(),
           "' has no layers in this version of Tessera (1d, 2d, 2.5d and 3d do); set "
           "parallel.tensor.mode to 1d, 2d, 2.5d or 3d");
  return true;
}

}  // namespace

std::shared_ptr<Linear> make_linear(const LinearSpec& spec, const BuildContext& ctx,
                                    ParallelStyle style) {
  check_style("make_linear", style,
              {ParallelStyle::none, ParallelStyle::column, ParallelStyle::row});
  if (ctx.tensor_2d()) return std::make_shared<Linear2D>(spec, ctx, style);  // whatever the hint
  if (ctx.tensor_3d()) return std::make_shared<Linear3D>(spec, ctx, style);  // whatever the hint
  if (style != ParallelStyle::none && one_d(ctx, "make_linear")) {
    if (style == ParallelStyle::column) return std::make_shared<ColumnParallelLinear>(spec, ctx);
    return std::make_shared<RowParallelLinear>(spec, ctx);
  }
  return std::make_shared<Linear>(spec, ctx.generator(), style);
}

std::shared_ptr<Linear> make_classifier(const LinearSpec& spec, const BuildContext& ctx) {
  if (ctx.tensor_2d()) return std::make_shared<Classifier2D>(spec, ctx);
  if (ctx.tensor_3d()) return std::make_shared<Classifier3D>(spec, ctx);
  return make_linear(spec, ctx);
}

std::shared_ptr<LayerNorm> make_layer_norm(const LayerNormSpec& spec) {
  return std::make_shared<LayerNorm>(spec);
}

std::shared_ptr<LayerNorm> make_layer_norm(const LayerNormSpec& spec, const BuildContext& ctx) {
  if (ctx.tensor_2d()) return std::make_shared<LayerNorm2D>(spec, ctx);
  if (ctx.tensor_3d()) return std::make_shared<LayerNorm3D>(spec, ctx);
  return make_layer_norm(spec);
}

std::shared_ptr<Embedding> make_embedding(const EmbeddingSpec& spec, const BuildContext& ctx,
                                          ParallelStyle style) {
  check_style("make_embedding", style, {ParallelStyle::none, ParallelStyle::vocab});
  if (ctx.tensor_2d()) {
    if (style == ParallelStyle::vocab)
      return std::make_shared<VocabParallelEmbedding2D>(spec, ctx, style);
    return std::make_shared<Embedding2D>(spec, ctx, style);
  }
  if (ctx.tensor_3d()) {
    if (style == ParallelStyle::vocab)
      return std::make_shared<VocabParallelEmbedding3D>(spec, ctx, style);
    return std::make_shared<Embedding3D>(spec, ctx, style);
  }
  if (style == ParallelStyle::vocab && one_d(ctx, "make_embedding"))
    return std::make_shared<VocabParallelEmbedding>(spec, ctx);
  return std::make_shared<Embedding>(spec, ctx.generator(), style);
}

DropoutChunk residual_dropout_chunk(const BuildContext& ctx) {
  const SequenceShard shard(ctx);
  if (ctx.tensor_2d() || ctx.tensor_3d()) {
    const DropoutChunk grid = ctx.tensor_2d()
                                  ? dropout_chunk_2d(ctx.summa_grid())
                                  : dropout_chunk_3d(cube_of(ctx, "residual_dropout_chunk"));
    if (!shard.on()) return grid;
    // The paper's sequence parallelism inside the grid: the sequence chunk along dim 1, the grid's
    // batch rows and feature columns around it.
    DropoutChunk c = shard.dropout_chunk();
    c.batch_parts = grid.batch_parts;
    c.batch_index = grid.batch_index;
    c.feature_parts = grid.parts;
    c.feature_index = grid.index;
    return c;
  }
  if (shard.on()) return shard.dropout_chunk();
  return SequenceSplit(ctx).dropout_chunk();
}

std::shared_ptr<Dropout> make_dropout(double p, const BuildContext& ctx) {
  return std::make_shared<Dropout>(p, residual_dropout_chunk(ctx));
}

std::shared_ptr<MultiHeadAttention> make_attention(const AttentionSpec& spec,
                                                   const BuildContext& ctx) {
  if (ctx.tensor_2d()) {
    auto attn = std::make_shared<MultiHeadAttention2D>(spec, ctx);
    set_dropout_chunks(*attn, residual_dropout_chunk(ctx));
    return attn;
  }
  if (ctx.tensor_3d()) {
    auto attn = std::make_shared<MultiHeadAttention3D>(spec, ctx);
    set_dropout_chunks(*attn, residual_dropout_chunk(ctx));
    return attn;
  }
  one_d(ctx, "make_attention");
  // Under sequence parallelism the output projection's dropout sees this rank's positions (a
  // Block sets the same chunk; a model that builds its own blocks gets it here).
  auto attn = std::make_shared<MultiHeadAttention>(spec, ctx);
  set_dropout_chunks(*attn, residual_dropout_chunk(ctx));
  return attn;
}

std::shared_ptr<MLP> make_mlp(const MLPSpec& spec, const BuildContext& ctx) {
  auto mlp = std::make_shared<MLP>(spec, ctx);  // its linears split under 1d and 2d
  // Its dropout acts on the residual stream: this rank's block of it (2D, 3D) or its positions
  // (sequence parallelism).
  set_dropout_chunks(*mlp, residual_dropout_chunk(ctx));
  return mlp;
}

std::shared_ptr<Block> make_block(const BlockSpec& spec, const BuildContext& ctx) {
  one_d(ctx, "make_block");
  return std::make_shared<Block>(spec, ctx);  // its layers split under 1d and 2d
}

std::shared_ptr<PatchEmbedding> make_patch_embedding(const PatchEmbeddingSpec& spec,
                                                     const BuildContext& ctx) {
  if (ctx.tensor_2d()) return std::make_shared<PatchEmbedding2D>(spec, ctx);
  if (ctx.tensor_3d()) return std::make_shared<PatchEmbedding3D>(spec, ctx);
  return std::make_shared<PatchEmbedding>(spec, ctx);
}

std::shared_ptr<ClassificationHead> make_classification_head(const ClassificationHeadSpec& spec,
                                                             const BuildContext& ctx) {
  return std::make_shared<ClassificationHead>(spec, ctx);  // its layers split under 2d and 3d
}

std::shared_ptr<LMHead> make_lm_head(const LMHeadSpec& spec, const BuildContext& ctx,
                                     ParallelStyle style) {
  check_style("make_lm_head", style, {ParallelStyle::none, ParallelStyle::vocab});
  if (ctx.tensor_2d()) return std::make_shared<VocabParallelLMHead2D>(spec, ctx, style);
  if (ctx.tensor_3d()) return std::make_shared<VocabParallelLMHead3D>(spec, ctx, style);
  if (style == ParallelStyle::vocab && one_d(ctx, "make_lm_head"))
    return std::make_shared<VocabParallelLMHead>(spec, ctx);
  return std::make_shared<LMHead>(spec, ctx.generator(), style);
}

std::shared_ptr<LMHead> make_tied_lm_head(const LMHeadSpec& spec, const Tensor& tied_weight,
                                          ParallelStyle style) {
  check_style("make_tied_lm_head", style, {ParallelStyle::none, ParallelStyle::vocab});
  return std::make_shared<LMHead>(spec, tied_weight, style);
}

std::shared_ptr<LMHead> make_tied_lm_head(const LMHeadSpec& spec, const Embedding& embedding,
                                          const BuildContext& ctx, ParallelStyle style) {
  check_style("make_tied_lm_head", style, {ParallelStyle::none, ParallelStyle::vocab});
  if (ctx.tensor_2d()) {
    auto* blocks = dynamic_cast<const VocabParallelEmbedding2D*>(&embedding);
    TS_CHECK(blocks != nullptr, "make_tied_lm_head",
             "expected a VocabParallelEmbedding2D (make_embedding with ParallelStyle vocab) to "
             "tie to under tensor parallelism mode '",
             ctx.tensor_mode_name(), "', got ", embedding.type_name());
    return std::make_shared<VocabParallelLMHead2D>(spec, *blocks, ctx, style);
  }
  if (ctx.tensor_3d()) {
    auto* pieces = dynamic_cast<const VocabParallelEmbedding3D*>(&embedding);
    TS_CHECK(pieces != nullptr, "make_tied_lm_head",
             "expected a VocabParallelEmbedding3D (make_embedding with ParallelStyle vocab) to "
             "tie to under tensor parallelism mode 3d, got ",
             embedding.type_name());
    return std::make_shared<VocabParallelLMHead3D>(spec, *pieces, ctx, style);
  }
  if (auto* split = dynamic_cast<const VocabParallelEmbedding*>(&embedding)) {
    TS_CHECK(style == ParallelStyle::vocab, "make_tied_lm_head",
             "expected ParallelStyle vocab for a head tied to a vocab-parallel embedding, got ",
             parallel_style_name(style));
    return std::make_shared<VocabParallelLMHead>(spec, *split, ctx);
  }
  return make_tied_lm_head(spec, embedding.weight(), style);
}

}  // namespace tessera::nn

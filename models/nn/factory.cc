// Layer factories (see factory.h): validate the parallel hint, build the serial layer.
#include "models/nn/factory.h"

#include <initializer_list>

#include "models/nn/parallel/layer_norm_2d.h"
#include "models/nn/parallel/linear_1d.h"
#include "models/nn/parallel/linear_2d.h"
#include "models/nn/parallel/vocab_1d.h"

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

bool two_d(const BuildContext& ctx) { return ctx.tensor_parallel() && ctx.tensor_mode() == "2d"; }

// Mode 2d has Linear, LayerNorm and MLP twins; a factory of another layer refuses it by name.
void refuse_2d(const BuildContext& ctx, const char* factory) {
  TS_CHECK(!two_d(ctx), factory,
           "tensor parallelism mode '2d' has Linear, LayerNorm and MLP layers only in this version "
           "of Tessera, no 2d twin for this layer; set parallel.tensor.mode to 1d");
}

// The 1D twins exist today; the other modes are refused by name until their layers land.
bool one_d(const BuildContext& ctx, const char* factory) {
  if (!ctx.tensor_parallel()) return false;
  refuse_2d(ctx, factory);
  TS_CHECK(ctx.tensor_mode() == "1d", factory, "tensor parallelism mode '", ctx.tensor_mode(),
           "' has no layers in this version of Tessera (1d does); set parallel.tensor.mode to 1d");
  return true;
}

}  // namespace

std::shared_ptr<Linear> make_linear(const LinearSpec& spec, const BuildContext& ctx,
                                    ParallelStyle style) {
  check_style("make_linear", style,
              {ParallelStyle::none, ParallelStyle::column, ParallelStyle::row});
  if (two_d(ctx)) return std::make_shared<Linear2D>(spec, ctx, style);  // whatever the hint
  if (style != ParallelStyle::none && one_d(ctx, "make_linear")) {
    if (style == ParallelStyle::column) return std::make_shared<ColumnParallelLinear>(spec, ctx);
    return std::make_shared<RowParallelLinear>(spec, ctx);
  }
  return std::make_shared<Linear>(spec, ctx.generator(), style);
}

std::shared_ptr<LayerNorm> make_layer_norm(const LayerNormSpec& spec) {
  return std::make_shared<LayerNorm>(spec);
}

std::shared_ptr<LayerNorm> make_layer_norm(const LayerNormSpec& spec, const BuildContext& ctx) {
  if (two_d(ctx)) return std::make_shared<LayerNorm2D>(spec, ctx);
  return make_layer_norm(spec);
}

std::shared_ptr<Embedding> make_embedding(const EmbeddingSpec& spec, const BuildContext& ctx,
                                          ParallelStyle style) {
  check_style("make_embedding", style, {ParallelStyle::none, ParallelStyle::vocab});
  if (style == ParallelStyle::vocab && one_d(ctx, "make_embedding"))
    return std::make_shared<VocabParallelEmbedding>(spec, ctx);
  return std::make_shared<Embedding>(spec, ctx.generator(), style);
}

std::shared_ptr<MultiHeadAttention> make_attention(const AttentionSpec& spec, const BuildContext& ctx) {
  refuse_2d(ctx, "make_attention");
  return std::make_shared<MultiHeadAttention>(spec, ctx);
}

std::shared_ptr<MLP> make_mlp(const MLPSpec& spec, const BuildContext& ctx) {
  // Its linears and (through make_layer_norm) norms split under 2d; dropout masks on the 2D layout
  // are not drawn by global position yet, so they would differ from the serial model's.
  TS_CHECK(!two_d(ctx) || spec.dropout == 0.0, "make_mlp",
           "expected dropout 0 under tensor parallelism mode '2d' (its masks are not drawn by "
           "global position in this version of Tessera), got ",
           spec.dropout);
  return std::make_shared<MLP>(spec, ctx);
}

std::shared_ptr<Block> make_block(const BlockSpec& spec, const BuildContext& ctx) {
  refuse_2d(ctx, "make_block");
  return std::make_shared<Block>(spec, ctx);
}

std::shared_ptr<PatchEmbedding> make_patch_embedding(const PatchEmbeddingSpec& spec,
                                                     const BuildContext& ctx) {
  refuse_2d(ctx, "make_patch_embedding");
  return std::make_shared<PatchEmbedding>(spec, ctx);
}

std::shared_ptr<ClassificationHead> make_classification_head(const ClassificationHeadSpec& spec,
                                                             const BuildContext& ctx) {
  refuse_2d(ctx, "make_classification_head");
  return std::make_shared<ClassificationHead>(spec, ctx);
}

std::shared_ptr<LMHead> make_lm_head(const LMHeadSpec& spec, const BuildContext& ctx,
                                     ParallelStyle style) {
  check_style("make_lm_head", style, {ParallelStyle::none, ParallelStyle::vocab});
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
  if (auto* split = dynamic_cast<const VocabParallelEmbedding*>(&embedding)) {
    TS_CHECK(style == ParallelStyle::vocab, "make_tied_lm_head",
             "expected ParallelStyle vocab for a head tied to a vocab-parallel embedding, got ",
             parallel_style_name(style));
    return std::make_shared<VocabParallelLMHead>(spec, *split, ctx);
  }
  return make_tied_lm_head(spec, embedding.weight(), style);
}

}  // namespace tessera::nn

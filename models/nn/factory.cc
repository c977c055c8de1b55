// Layer factories (see factory.h): validate the parallel hint, build the serial layer.
#include "models/nn/factory.h"

#include <initializer_list>

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

std::shared_ptr<Linear> make_linear(const LinearSpec& spec, Generator& gen, ParallelStyle style) {
  check_style("make_linear", style,
              {ParallelStyle::none, ParallelStyle::column, ParallelStyle::row});
  return std::make_shared<Linear>(spec, gen, style);
}

std::shared_ptr<LayerNorm> make_layer_norm(const LayerNormSpec& spec) {
  return std::make_shared<LayerNorm>(spec);
}

std::shared_ptr<Embedding> make_embedding(const EmbeddingSpec& spec, Generator& gen,
                                          ParallelStyle style) {
  check_style("make_embedding", style, {ParallelStyle::none, ParallelStyle::vocab});
  return std::make_shared<Embedding>(spec, gen, style);
}

std::shared_ptr<MultiHeadAttention> make_attention(const AttentionSpec& spec, Generator& gen) {
  return std::make_shared<MultiHeadAttention>(spec, gen);
}

std::shared_ptr<MLP> make_mlp(const MLPSpec& spec, Generator& gen) {
  return std::make_shared<MLP>(spec, gen);
}

std::shared_ptr<Block> make_block(const BlockSpec& spec, Generator& gen) {
  return std::make_shared<Block>(spec, gen);
}

std::shared_ptr<PatchEmbedding> make_patch_embedding(const PatchEmbeddingSpec& spec,
                                                     Generator& gen) {
  return std::make_shared<PatchEmbedding>(spec, gen);
}

std::shared_ptr<ClassificationHead> make_classification_head(const ClassificationHeadSpec& spec,
                                                             Generator& gen) {
  return std::make_shared<ClassificationHead>(spec, gen);
}

std::shared_ptr<LMHead> make_lm_head(const LMHeadSpec& spec, Generator& gen, ParallelStyle style) {
  check_style("make_lm_head", style, {ParallelStyle::none, ParallelStyle::vocab});
  return std::make_shared<LMHead>(spec, gen, style);
}

std::shared_ptr<LMHead> make_tied_lm_head(const LMHeadSpec& spec, const Tensor& tied_weight,
                                          ParallelStyle style) {
  check_style("make_tied_lm_head", style, {ParallelStyle::none, ParallelStyle::vocab});
  return std::make_shared<LMHead>(spec, tied_weight, style);
}

}  // namespace tessera::nn

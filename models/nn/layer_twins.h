// The table of layer twins: one row per tensor mode (and one of serial layers), naming what each
// factory of factory.h builds under that mode, chosen once from the build context, as
// Colossal-AI keeps `_parallel_linear = {None: ..., "1d": ..., "2d": ..., "3d": ...}`. A new
// tensor mode is one parallel::TensorMode value, one row (a twins_*.cc beside its twin classes)
// and one case in layer_twins(); the compiler points at every switch that misses it.
#pragma once

#include <memory>
#include <optional>

#include "models/nn/attention.h"
#include "models/nn/build_context.h"
#include "models/nn/dropout.h"
#include "models/nn/embedding.h"
#include "models/nn/heads.h"
#include "models/nn/layer_norm.h"
#include "models/nn/linear.h"
#include "models/nn/parallel_style.h"
#include "models/nn/patch_embedding.h"

namespace tessera::nn {

// The factories check the ParallelStyle hint before they call a row; a row decides what the hint
// means under its mode (1D honours it, 2D and 3D split every layer whatever it says).
struct LayerTwins {
  std::shared_ptr<Linear> (*linear)(const LinearSpec&, const BuildContext&, ParallelStyle);
  // A Linear to a few classes, whose output the 2D and 3D twins do not split.
  std::shared_ptr<Linear> (*classifier)(const LinearSpec&, const BuildContext&);
  std::shared_ptr<LayerNorm> (*layer_norm)(const LayerNormSpec&, const BuildContext&);
  std::shared_ptr<Embedding> (*embedding)(const EmbeddingSpec&, const BuildContext&, ParallelStyle);
  std::shared_ptr<MultiHeadAttention> (*attention)(const AttentionSpec&, const BuildContext&);
  std::shared_ptr<PatchEmbedding> (*patch_embedding)(const PatchEmbeddingSpec&,
                                                     const BuildContext&);
  std::shared_ptr<LMHead> (*lm_head)(const LMHeadSpec&, const BuildContext&, ParallelStyle);
  // A head sharing `embedding`'s table (the mode's vocab-parallel twin's shard where it has one).
  std::shared_ptr<LMHead> (*tied_lm_head)(const LMHeadSpec&, const Embedding&, const BuildContext&,
                                          ParallelStyle);
  // Where this rank's block of the residual stream (B, T, C) lies in the serial one when the mode
  // splits the stream itself (2D, 3D); nullopt when every rank holds all of it.
  std::optional<DropoutChunk> (*residual_block)(const BuildContext&);
};

// The row of ctx's tensor mode; the serial row without tensor parallelism (size 1).
const LayerTwins& layer_twins(const BuildContext& ctx);

// The rows: serial_twins.cc, parallel/twins_1d.cc, parallel/twins_2d.cc, parallel/twins_3d.cc.
const LayerTwins& serial_twins();
const LayerTwins& twins_1d();
const LayerTwins& twins_2d();  // 2D and 2.5D (Tesseract runs them on each depth layer's batch)
const LayerTwins& twins_3d();

}  // namespace tessera::nn

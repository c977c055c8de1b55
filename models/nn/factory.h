// Layer factories: the one place models build their layers. Each checks its hint and returns what
// the row of the twin table for the build context's tensor mode names (layer_twins.h): the serial
// layer or its tensor-parallel twin (a subclass overriding forward), so GPT, BERT and ViT stay
// written once, serially.
//
// The ParallelStyle hint says which twin a call site wants under 1D tensor parallelism (Megatron's
// pairing, which needs one collective per pair):
//   make_linear(column)   -> ColumnParallelLinear: weight rows (out features) split, output left
//                            split. Asked for by MultiHeadAttention's c_attn (heads split over
//                            ranks) and MLP's c_fc (hidden units split).
//   make_linear(row)      -> RowParallelLinear: weight columns (in features) split, takes the split
//                            input of the column layer before it, all-reduces its output. Asked for
//                            by MultiHeadAttention's c_proj and MLP's c_proj.
//   make_linear(none)     -> the serial Linear even under 1D (small heads, patches).
//   make_embedding(vocab) -> VocabParallelEmbedding: rows of the table split; asked for by the
//                            token embeddings of GPT and BERT (positions stay ParallelStyle::none).
//   make_lm_head(vocab)   -> a vocabulary-split head feeding vocab-parallel cross-entropy; a tied
//                            head shares the VocabParallelEmbedding's shard.
// Mode 2d (models/nn/parallel/*_2d.h) splits every layer over the q x q grid whatever the hint
// (which is only checked and kept): the activations between layers are blocks (B / q, T, C / q)
// (parallel/tensor/summa.h) and every layer takes and gives them. make_linear -> Linear2D,
// make_classifier -> Classifier2D, make_layer_norm(spec, ctx) -> LayerNorm2D, make_attention ->
// MultiHeadAttention2D, make_embedding(vocab) -> VocabParallelEmbedding2D, make_embedding(none) ->
// Embedding2D, make_lm_head / make_tied_lm_head(embedding) -> VocabParallelLMHead2D,
// make_patch_embedding -> PatchEmbedding2D; make_mlp, make_block and make_classification_head
// build theirs from these. The layers at the model's edges take what the serial layer takes (the
// whole batch's ids, images, targets) and the heads give what it gives (the whole batch's logits
// and loss), so a model's forward and loss read as before. Mode 2.5d builds the same twins: each
// depth layer runs them on its batch slice (ctx.tensor_2d(), parallel/tensor/summa.h).
// Mode 3d (models/nn/parallel/*_3d.h) does the same on the q x q x q cube with pieces
// (B / q, T, C / q^2) (parallel/tensor/cube_3d.h): Linear3D, LayerNorm3D, MultiHeadAttention3D,
// VocabParallelEmbedding3D / Embedding3D, VocabParallelLMHead3D, make_classifier -> Classifier3D,
// make_patch_embedding -> PatchEmbedding3D (make_classification_head builds its 3D head from
// these). Serial layers record their hint (parallel_style()) so tests pin each call site. A factory
// refuses a hint its layer has no twin for (ValueError naming the factory and the hint).
#pragma once

#include <memory>

#include "core/generator.h"
#include "models/nn/attention.h"
#include "models/nn/block.h"
#include "models/nn/build_context.h"
#include "models/nn/dropout.h"
#include "models/nn/embedding.h"
#include "models/nn/heads.h"
#include "models/nn/layer_norm.h"
#include "models/nn/linear.h"
#include "models/nn/mlp.h"
#include "models/nn/parallel_style.h"
#include "models/nn/patch_embedding.h"

namespace tessera::nn {

// Hints: none, column, row.
std::shared_ptr<Linear> make_linear(const LinearSpec& spec, const BuildContext& ctx,
                                    ParallelStyle style = ParallelStyle::none);
// A Linear to a few classes (a classification head's): make_linear(spec, ctx) but under modes 2d
// and 3d, where its output is not split (Classifier2D / Classifier3D give the whole batch's
// logits).
std::shared_ptr<Linear> make_classifier(const LinearSpec& spec, const BuildContext& ctx);
std::shared_ptr<LayerNorm> make_layer_norm(const LayerNormSpec& spec);
// Under mode 2d: LayerNorm2D; under 3d: LayerNorm3D; otherwise make_layer_norm(spec).
std::shared_ptr<LayerNorm> make_layer_norm(const LayerNormSpec& spec, const BuildContext& ctx);
// Hints: none, vocab.
std::shared_ptr<Embedding> make_embedding(const EmbeddingSpec& spec, const BuildContext& ctx,
                                          ParallelStyle style = ParallelStyle::none);
// Where the residual stream (B, T, C) between the layers built from ctx lies in the serial one,
// for its Dropouts: a sequence shard under sequence parallelism, this rank's 2D block under mode
// 2d, the whole tensor otherwise.
DropoutChunk residual_dropout_chunk(const BuildContext& ctx);
// A Dropout on that residual stream (a model's embedding dropout).
std::shared_ptr<Dropout> make_dropout(double p, const BuildContext& ctx);
// Composite layers: their linears ask for column then row (see above).
std::shared_ptr<MultiHeadAttention> make_attention(const AttentionSpec& spec,
                                                   const BuildContext& ctx);
std::shared_ptr<MLP> make_mlp(const MLPSpec& spec, const BuildContext& ctx);
std::shared_ptr<Block> make_block(const BlockSpec& spec, const BuildContext& ctx);
std::shared_ptr<PatchEmbedding> make_patch_embedding(const PatchEmbeddingSpec& spec,
                                                     const BuildContext& ctx);
std::shared_ptr<ClassificationHead> make_classification_head(const ClassificationHeadSpec& spec,
                                                             const BuildContext& ctx);
// Hints: none, vocab.
std::shared_ptr<LMHead> make_lm_head(const LMHeadSpec& spec, const BuildContext& ctx,
                                     ParallelStyle style = ParallelStyle::none);
// Serial: tied to a (vocab, d_model) tensor.
std::shared_ptr<LMHead> make_tied_lm_head(const LMHeadSpec& spec, const Tensor& tied_weight,
                                          ParallelStyle style = ParallelStyle::none);
// Tied to `embedding`'s table: its shard when the embedding is vocab-parallel (1D or 2D).
std::shared_ptr<LMHead> make_tied_lm_head(const LMHeadSpec& spec, const Embedding& embedding,
                                          const BuildContext& ctx,
                                          ParallelStyle style = ParallelStyle::none);

}  // namespace tessera::nn

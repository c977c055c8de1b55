// Embeddings and the LM head on the 3D cube (parallel/tensor/cube_3d.h), whose activations are
// pieces (B / q, T, C / q^2): rank (i, j, k) holds batch chunk i, features chunk k q + j. Every
// rank takes the whole batch's ids (as the serial layer does) and gives its piece.
//   VocabParallelEmbedding3D  the table (V, C) cut as a Linear3D weight of V outputs and C inputs
//                             (parallel/tensor/placement_3d.h): rows chunks k' q + j for every k',
//                             columns chunk k q + i, (V / q, C / q^2), so a tied LM head uses it
//                             as is. It looks up the whole batch's ids it holds (zeros for the
//                             others), partial rows of columns k q + i. An all-to-all over the
//                             weight group hands rank i' batch chunk i' of every rank's columns:
//                             the feature block k (C / q) of its own batch chunk, partial over the
//                             rows its input-group rank holds; a reduce-scatter over the input
//                             group (whose ranks hold every row) sums that and gives rank j its
//                             features chunk k q + j. Every byte moved is a partial sum some rank
//                             needs (the whole batch's input all-reduce, then a weight all-gather
//                             keeping 1/q^2 of what it gathered, moved 1 + q/2 times as much).
//                             (A rank's own columns are chunk k q + i, the layout's k q + j: the
//                             all-to-all is the transpose.)
//   VocabParallelLMHead3D     the logits linear_3d(x, W) with W (V, C) cut as above (tied: the
//                             embedding's pieces): (B / q, T, V / q^2), vocabulary chunk k q + j;
//                             a bias (V) as a 3D vector. loss() is the 3D vocab-parallel
//                             cross-entropy over the plane group it splits off at construction
//                             (parallel/tensor/vocab_cross_entropy_3d.h), never gathering the
//                             logits; forward() gathers the full (B, T, V) for generation and
//                             evaluation.
//   Embedding3D               a table split by features only (positions): its columns cut as a
//                             3D vector, (V, C / q^3). Ids (B, ...) of 2 or more dims are a
//                             batch, cut to chunk i, looked up in the table all-gathered over the
//                             weight group to the rank's (V, C / q^2); ids of one dim (positions,
//                             shared by every sequence) are looked up in the shard first and only
//                             those rows gathered: (T, C / q^2), T of the table's L rows.
// Shards are drawn at their global indices (shard_init.h): the gathered tables equal the serial
// layers' from the same generator. Needs V divisible by q^2 (the token table), C by q^2 (q^3 for
// Embedding3D) and a batch divisible by q.
// Communication per rank (n = B T ids):
//   VocabParallelEmbedding3D  forward: weight all-to-all of (n, C / q^2), input reduce-scatter of
//                             (n / q, C / q); backward: input all-gather, weight all-to-all
//                             (row(): the input all-reduce of one row, the weight all-gather)
//   VocabParallelLMHead3D     linear_3d's (matmul_3d.h); the loss's plane statistics on B / q T
//                             rows and one scalar all-reduce over the weight group
//   Embedding3D               positions (T): weight all-gather of (T, C / q^2) forward,
//                             reduce-scatter backward; batched ids: of the table (V, C / q^2)
#pragma once

#include "models/nn/build_context.h"
#include "models/nn/embedding.h"
#include "models/nn/heads.h"
#include "parallel/tensor/cube_3d.h"
#include "parallel/tensor/vocab_cross_entropy.h"

namespace tessera::nn {

class VocabParallelEmbedding3D final : public Embedding {
 public:
  // ctx must be tensor-parallel in mode 3d.
  VocabParallelEmbedding3D(const EmbeddingSpec& spec, const BuildContext& ctx,
                           ParallelStyle style = ParallelStyle::vocab);
  std::string type_name() const override { return "VocabParallelEmbedding3D"; }
  // ids (B, ...) global i32/i64, the whole batch -> this rank's piece (B / q, ..., dim / q^2)
  Tensor forward(const Tensor& ids) override;
  // (dim / q^2): features chunk k q + j of the row.
  Tensor row(int64_t id) override;
  const parallel::tensor::Cube3D& cube() const { return cube_; }

 private:
  Tensor partial_rows(const Tensor& ids);   // (..., dim / q^2): its rows' columns, others zero
  Tensor feature_block(const Tensor& ids);  // (..., dim / q): features block k of the rows
  parallel::tensor::Cube3D cube_;
};

class VocabParallelLMHead3D final : public LMHead {
 public:
  // Its own weight pieces, drawn as the serial LMHead draws its weight.
  VocabParallelLMHead3D(const LMHeadSpec& spec, const BuildContext& ctx,
                        ParallelStyle style = ParallelStyle::vocab);
  // Tied to the embedding's pieces.
  VocabParallelLMHead3D(const LMHeadSpec& spec, const VocabParallelEmbedding3D& embedding,
                        const BuildContext& ctx, ParallelStyle style = ParallelStyle::vocab);
  std::string type_name() const override { return "VocabParallelLMHead3D"; }
  // This rank's piece (B / q, ..., d_model / q^2) -> the full (B, ..., vocab) logits on every rank.
  Tensor forward(const Tensor& x) override;
  // x as forward's; targets the whole batch's (B, ...): the whole batch's loss on every rank.
  Tensor loss(const Tensor& x, const Tensor& targets, const CrossEntropyOptions& opts) override;
  // This rank's piece of the logits (B / q, ..., V / q^2): batch chunk i, vocabulary chunk k q + j.
  Tensor local_logits(const Tensor& x);
  const parallel::tensor::VocabShard& shard() const { return shard_; }

 private:
  LMHeadSpec checked(const LMHeadSpec& spec);
  parallel::tensor::Cube3D cube_;
  parallel::tensor::CommPtr plane_;
  parallel::tensor::VocabShard shard_;
};

class Embedding3D final : public Embedding {
 public:
  // ctx must be tensor-parallel in mode 3d.
  Embedding3D(const EmbeddingSpec& spec, const BuildContext& ctx,
              ParallelStyle style = ParallelStyle::none);
  std::string type_name() const override { return "Embedding3D"; }
  // ids (B, ...) (2+ dims) -> (B / q, ..., dim / q^2); ids (T) -> (T, dim / q^2)
  Tensor forward(const Tensor& ids) override;
  // (dim / q^2), features chunk k q + j of the row.
  Tensor row(int64_t id) override;

 private:
  Tensor gathered_rows(const Tensor& ids);  // ids (T) -> (T, dim / q^2)
  parallel::tensor::Cube3D cube_;
};

}  // namespace tessera::nn

// Embeddings and the LM head on the 2D (SUMMA) grid (parallel/tensor/summa.h), whose activations
// are blocks (B / q, T, C / q): rank (grid row r, column s) holds batch chunk r, features chunk s.
// Every rank takes the whole batch's ids (as the serial layer does) and gives its block.
//   VocabParallelEmbedding2D  (Colossal-AI's VocabParallelEmbedding2D) the table (V, C), its
//                             vocabulary padded to V_pad (a multiple of q^2; padding rows zero),
//                             cut in blocks: rank (r, s) holds rows chunk r, columns chunk s
//                             (V_pad / q, C / q). It looks up the whole batch's ids it holds
//                             (zeros for the others) and reduce-scatters the (B, T, C / q) partial
//                             rows over the column group along the batch: its block of the sum.
//   VocabParallelLMHead2D     the logits x W^T = summa_abt(x, W) with W (tied: the embedding's
//                             blocks) as above: the block (B / q, T, V_pad / q) of batch chunk r,
//                             vocabulary slice s; the bias (V_pad) cut as a 2D vector
//                             (placement_2d.h). loss() is the 2D vocab-parallel cross-entropy
//                             (parallel/tensor/vocab_cross_entropy_2d.h), never gathering the
//                             logits; forward() gathers the full (B, T, V) for generation and
//                             evaluation.
//   Embedding2D               (Colossal-AI's Embedding2D) a table split by features only, for the
//                             small tables (positions, BERT's token types): its columns cut as a
//                             2D vector, (V, C / q^2), all-gathered over the column group to the
//                             grid column's (V, C / q) at each forward. Ids (B, ...) of 2 or more
//                             dims are a batch, cut to chunk r; ids of one dim (positions, shared
//                             by every sequence) are looked up whole: (T, C / q).
// Shards are drawn at their global indices (shard_init.h): the gathered tables equal the serial
// layers' from the same generator. Needs C divisible by q^2 and a batch divisible by q.
// 2.5D: every depth layer holds the same blocks (gradients summed over the depth group) and works
// on its slice of the batch: the vocab-parallel lookup takes the layer's B / d ids, the blocks
// are batch chunk l q + r of d q, the loss and gathers of the whole batch run over "2.5d_xz".
// Communication per rank (x: this rank's block bytes):
//   VocabParallelEmbedding2D  forward: column reduce-scatter of (B, T, C / q); backward: column
//                             all-gather of it
//   VocabParallelLMHead2D     the SUMMA abt (summa.h) and its backward; the loss's statistics
//                             (row: 1 max and 1 sum all-reduce of B / q T rows; column: one scalar)
//   Embedding2D               forward: column all-gather of (V, C / q); backward: reduce-scatter
#pragma once

#include <memory>

#include "models/nn/build_context.h"
#include "models/nn/embedding.h"
#include "models/nn/heads.h"
#include "parallel/tensor/summa.h"
#include "parallel/tensor/vocab_cross_entropy.h"

namespace tessera::nn {

class VocabParallelEmbedding2D final : public Embedding {
 public:
  // ctx must be tensor-parallel in mode 2d or 2.5d.
  VocabParallelEmbedding2D(const EmbeddingSpec& spec, const BuildContext& ctx,
                           ParallelStyle style = ParallelStyle::vocab);
  std::string type_name() const override { return "VocabParallelEmbedding2D"; }
  // ids (B, ...) global i32/i64, the whole batch -> this rank's block (B / q, ..., dim / q)
  Tensor forward(const Tensor& ids) override;
  // (dim / q): the grid column's features of the row, its gradient summed over the batch chunks.
  Tensor row(int64_t id) override;
  // This rank's rows of the table: the slice of its grid row.
  const parallel::tensor::VocabShard& shard() const { return shard_; }
  const parallel::tensor::SummaGrid& grid() const { return grid_; }

 private:
  Tensor lookup(const Tensor& ids);  // (..., dim / q) partial over the column group
  parallel::tensor::SummaGrid grid_;
  parallel::tensor::VocabShard shard_;
};

class VocabParallelLMHead2D final : public LMHead {
 public:
  // Its own weight blocks, drawn as the serial LMHead draws its weight.
  VocabParallelLMHead2D(const LMHeadSpec& spec, const BuildContext& ctx,
                        ParallelStyle style = ParallelStyle::vocab);
  // Tied to the embedding's blocks.
  VocabParallelLMHead2D(const LMHeadSpec& spec, const VocabParallelEmbedding2D& embedding,
                        const BuildContext& ctx, ParallelStyle style = ParallelStyle::vocab);
  std::string type_name() const override { return "VocabParallelLMHead2D"; }
  // This rank's block (B / q, ..., d_model / q) -> the full (B, ..., vocab) logits on every rank.
  Tensor forward(const Tensor& x) override;
  // x as forward's; targets the whole batch's (B, ...): the whole batch's loss on every rank.
  Tensor loss(const Tensor& x, const Tensor& targets, const CrossEntropyOptions& opts) override;
  // This rank's block of the logits (B / q, ..., V_pad / q): batch chunk r, vocabulary slice s.
  Tensor local_logits(const Tensor& x);
  // The vocabulary slice of this rank's logits (its grid column's).
  const parallel::tensor::VocabShard& shard() const { return shard_; }

 private:
  void adopt_bias();
  parallel::tensor::SummaGrid grid_;
  parallel::tensor::VocabShard shard_;
};

class Embedding2D final : public Embedding {
 public:
  // ctx must be tensor-parallel in mode 2d or 2.5d.
  Embedding2D(const EmbeddingSpec& spec, const BuildContext& ctx,
              ParallelStyle style = ParallelStyle::none);
  std::string type_name() const override { return "Embedding2D"; }
  // ids (B, ...) (2+ dims) -> (B / q, ..., dim / q); ids (T) -> (T, dim / q)
  Tensor forward(const Tensor& ids) override;
  // (dim / q), the grid column's features of the row.
  Tensor row(int64_t id) override;

 private:
  parallel::tensor::SummaGrid grid_;
};

}  // namespace tessera::nn

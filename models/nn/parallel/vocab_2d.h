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
//                             2D vector, (V, C / q^2). Ids (B, ...) of 2 or more dims are a batch,
//                             cut to chunk r, looked up in the table all-gathered over the column
//                             group to the grid column's (V, C / q); ids of one dim (positions,
//                             shared by every sequence) are looked up in the shard first and only
//                             those rows gathered: (T, C / q), T of the table's L rows.
// Shards are drawn at their global indices (shard_init.h): the gathered tables equal the serial
// layers' from the same generator. Needs C divisible by q^2 and a batch divisible by q.
// 2.5D: every depth layer holds the same blocks (gradients summed over the depth group) and works
// on its slice of the batch: the vocab-parallel lookup takes the layer's B / d ids, the blocks
// are batch chunk l q + r of d q, the loss and gathers of the whole batch run over "2.5d_xz". A
// tied table's lookup and LM head share one depth replica (SharedDepthReplica), so its gradient
// is summed over the depth group once.
// Communication per rank (x: this rank's block bytes):
//   VocabParallelEmbedding2D  forward: column reduce-scatter of (B, T, C / q); backward: column
//                             all-gather of it
//   VocabParallelLMHead2D     the SUMMA abt (summa.h) and its backward; the loss's statistics
//                             (row: 1 max and 1 sum all-reduce of B / q T rows; column: one scalar)
//   Embedding2D               positions (T): column all-gather of (T, C / q) forward,
//                             reduce-scatter backward (2.5D: the depth sum of (T, C / q^2));
//                             batched ids: of the table (V, C / q)
#pragma once

#include <memory>

#include "models/nn/build_context.h"
#include "models/nn/embedding.h"
#include "models/nn/heads.h"
#include "parallel/tensor/summa.h"
#include "parallel/tensor/vocab_cross_entropy.h"

namespace tessera::nn {

// One table's 2.5D depth replica (depth_replica, parallel/tensor/summa.h), made once and handed to
// every op that uses the table, so a backward sums the table's gradient over the depth group once
// however many uses it has: a tied table's lookup and LM head add their gradients at the replica's
// one node, whose all-reduce then runs once (a replica per use all-reduced the block twice). The
// replica is a handle on the table's storage whose node keeps nothing for backward, so it serves
// every step; it is made anew when the table is another tensor or storage, or when whether it
// needs a history changes (no_grad, a frozen table). The table itself in 2D.
class SharedDepthReplica {
 public:
  explicit SharedDepthReplica(parallel::tensor::SummaGrid grid) : grid_(std::move(grid)) {}
  Tensor of(const Tensor& table);

 private:
  parallel::tensor::SummaGrid grid_;
  Tensor table_, replica_;
};

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
  // The table's depth replica, which a tied LM head shares.
  const std::shared_ptr<SharedDepthReplica>& table_replica() const { return table_; }

 private:
  Tensor lookup(const Tensor& ids);  // (..., dim / q) partial over the column group
  parallel::tensor::SummaGrid grid_;
  parallel::tensor::VocabShard shard_;
  std::shared_ptr<SharedDepthReplica> table_;
};

class VocabParallelLMHead2D final : public LMHead {
 public:
  // Its own weight blocks, drawn as the serial LMHead draws its weight.
  VocabParallelLMHead2D(const LMHeadSpec& spec, const BuildContext& ctx,
                        ParallelStyle style = ParallelStyle::vocab);
  // Tied to the embedding's blocks and their depth replica.
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
  parallel::tensor::SummaGrid grid_;
  parallel::tensor::VocabShard shard_;
  std::shared_ptr<SharedDepthReplica> table_;
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
  Tensor gathered_rows(const Tensor& ids);  // ids (T) -> (T, dim / q)
  parallel::tensor::SummaGrid grid_;
};

}  // namespace tessera::nn

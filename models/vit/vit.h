// Vision Transformer: patch embedding, a learned class token, learned positions, N pre-LN
// bidirectional blocks and a classification head (final LayerNorm on the class token, then a
// linear). Written once, serially, through the models/nn factories. Parameter names:
// patch_embed.proj.*, cls_token, pos_embed, h.N.*, head.norm.*, head.head.*.
#pragma once

#include <memory>

#include "core/generator.h"
#include "models/nn/nn.h"
#include "models/nn/parallel/sequence_1d.h"
#include "models/nn/parallel/split_2d.h"
#include "models/nn/parallel/split_3d.h"
#include "models/nn/pipeline_stage.h"
#include "models/nn/sequence_shard.h"
#include "models/vit/vit_config.h"

namespace tessera::vit {

class ViT : public nn::Module {
 public:
  // Weights N(0, init_std) (patch projection, class token, positions, linears), zero biases,
  // unit LayerNorm gains.
  // Under a context with tensor parallelism the blocks are their 1D twins (factory.h). Under
  // sequence parallelism (parallel.tensor.sequence_parallel) the token sequence, num_patches + 1
  // long (which must divide by parallel.tensor.size), is split into shards after the positions
  // are added: dropout and the blocks run on (B, (N + 1)/P, D), gathered before the head. Under
  // 2D tensor parallelism every layer is its 2D twin and the tokens this rank's block
  // (B / q, N + 1, D / q): the class token and positions (held whole) are cut to its features,
  // and the head gives the whole batch's logits. Under 3D tensor parallelism likewise with pieces
  // (B / q, N + 1, D / q^2), the class token and positions held in q^3 pieces along D
  // (split_3d.h) and all-gathered to the rank's features. Under pipeline parallelism this rank
  // builds only its stages' layers (pipeline_stage.h), with the serial model's weights: the
  // embeddings on global stage 0, the head on the last one. Under the paper's sequence parallelism
  // (parallel.sequence = S > 1) the token sequence [class token, patch 0, .., patch N - 1] is split
  // contiguously, (N + 1)/S tokens per rank, so rank 0's shard starts with the class token; the
  // blocks run on the shards, and the head reads the class token's final state, handed from rank 0
  // to every rank (SequenceShard::first_token), so each rank computes the serial logits and loss.
  // When N + 1 does not divide by S (square grids never split in 4), the sequence is padded at
  // its end to a multiple of S with keys every block masks out; dropout must then be off (its
  // serial masks are drawn over N + 1 tokens).
  ViT(const ViTConfig& config, const nn::BuildContext& ctx);
  std::string type_name() const override { return "ViT"; }

  // images (B, C, H, W) f32 -> logits (B, num_classes). Refused under pipeline parallelism.
  Tensor forward(const Tensor& images);
  // Mean cross-entropy of forward(images) against labels (B).
  Tensor loss(const Tensor& images, const Tensor& labels);

  // Pipeline parallelism: local model chunk `chunk`'s part of the forward. input: the images
  // (B, C, H, W) on global stage 0, else the previous stage's tokens (B, N + 1, D) (sequence
  // parallel: this rank's shard). Returns the tokens, or on the last stage the mean loss against
  // labels (B) (undefined labels: the logits (B, num_classes)). Serially
  // stage_forward(0, images, labels) is loss(images, labels).
  Tensor stage_forward(int chunk, const Tensor& input, const Tensor& labels);
  const nn::PipelineStage& stage() const { return stage_; }

  const ViTConfig& config() const { return config_; }
  // Under pipeline parallelism: undefined off global stage 0, and the held blocks only.
  // Under 3D this rank's pieces along D: (1, 1, D / q^3) and (1, N + 1, D / q^3).
  const Tensor& cls_token() const { return cls_token_; }  // (1, 1, D)
  const Tensor& pos_embed() const { return pos_embed_; }  // (1, N + 1, D)
  const std::shared_ptr<nn::ModuleList>& blocks() const { return h_; }

 private:
  ViTConfig config_;
  nn::SequenceSplit seq_;  // off unless parallel.tensor.sequence_parallel
  nn::Split2D split2d_;    // off unless parallel.tensor.mode 2d
  nn::Split3D split3d_;    // off unless parallel.tensor.mode 3d
  nn::SequenceShard sp_;   // off unless parallel.sequence > 1 (the paper's sequence parallelism)
  int64_t sequence_padding_ = 0;  // parallel.sequence: tokens appended to make N + 1 divide by S
  std::shared_ptr<nn::PatchEmbedding> patch_embed_;
  Tensor cls_token_, pos_embed_;
  std::shared_ptr<nn::Dropout> drop_;
  std::shared_ptr<nn::ModuleList> h_;
  std::shared_ptr<nn::ClassificationHead> head_;
  nn::PipelineStage stage_;
  std::vector<int64_t> block_slot_;  // global block index -> position in h_ (-1: not held)

  // The constructor's steps, in the order that draws the serial weights.
  void check_sequence_split() const;  // tensor.sequence_parallel: N + 1 divides by P
  int64_t sequence_padding() const;   // parallel.sequence: tokens to append (checked)
  nn::PipelineStage plan_stages(const nn::BuildContext& ctx) const;
  void build_embeddings(const nn::BuildContext& ctx);  // patch_embed, cls_token, pos_embed
  void build_blocks(const nn::BuildContext& ctx);
  void build_head(const nn::BuildContext& ctx);

  Tensor embed(const Tensor& images);  // (B, N + 1, D); sequence parallel: this rank's rows
  Tensor run_blocks(Tensor x, int64_t begin, int64_t end);
  Tensor head(const Tensor& x);  // the final tokens (sharded or not) -> logits (B, num_classes)
  // This rank's features of the class token or the positions (1, ..., D): the whole tensor
  // serially, its 2D block's or its 3D piece's columns.
  Tensor features(const Tensor& param) const;
};

}  // namespace tessera::vit

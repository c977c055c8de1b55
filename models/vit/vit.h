// Vision Transformer: patch embedding, a learned class token, learned positions, N pre-LN
// bidirectional blocks and a classification head (final LayerNorm on the class token, then a
// linear). Written once, serially, through the models/nn factories. Parameter names:
// patch_embed.proj.*, cls_token, pos_embed, h.N.*, head.norm.*, head.head.*.
#pragma once

#include <memory>

#include "core/generator.h"
#include "models/nn/nn.h"
#include "models/nn/parallel/sequence_1d.h"
#include "models/vit/vit_config.h"

namespace tessera::vit {

class ViT : public nn::Module {
 public:
  // Weights N(0, init_std) (patch projection, class token, positions, linears), zero biases,
  // unit LayerNorm gains.
  // Under a context with tensor parallelism the blocks are their 1D twins (factory.h). Under
  // sequence parallelism (parallel.tensor.sequence_parallel) the token sequence, num_patches + 1
  // long (which must divide by parallel.tensor.size), is split into shards after the positions
  // are added: dropout and the blocks run on (B, (N + 1)/P, D), gathered before the head.
  ViT(const ViTConfig& config, const nn::BuildContext& ctx);
  std::string type_name() const override { return "ViT"; }

  // images (B, C, H, W) f32 -> logits (B, num_classes).
  Tensor forward(const Tensor& images);
  // Mean cross-entropy of forward(images) against labels (B).
  Tensor loss(const Tensor& images, const Tensor& labels);

  const ViTConfig& config() const { return config_; }
  const Tensor& cls_token() const { return cls_token_; }  // (1, 1, D)
  const Tensor& pos_embed() const { return pos_embed_; }  // (1, N + 1, D)
  const std::shared_ptr<nn::ModuleList>& blocks() const { return h_; }

 private:
  ViTConfig config_;
  nn::SequenceSplit seq_;  // off unless parallel.tensor.sequence_parallel
  std::shared_ptr<nn::PatchEmbedding> patch_embed_;
  Tensor cls_token_, pos_embed_;
  std::shared_ptr<nn::Dropout> drop_;
  std::shared_ptr<nn::ModuleList> h_;
  std::shared_ptr<nn::ClassificationHead> head_;
};

}  // namespace tessera::vit

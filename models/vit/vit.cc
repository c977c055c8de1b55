// ViT construction, forward and loss (see vit.h).
#include "models/vit/vit.h"

#include "autograd/ops.h"

namespace tessera::vit {

ViT::ViT(const ViTConfig& config, const nn::BuildContext& ctx) : config_(config), seq_(ctx) {
  Generator& gen = ctx.generator();
  config.validate();
  const ViTConfig& c = config_;
  TS_CHECK((c.num_patches() + 1) % seq_.parts() == 0, "ViT",
           "expected the token sequence (num_patches + 1 = ", c.num_patches(),
           " + 1 = ", c.num_patches() + 1, ", image_size ", c.image_size, " / patch_size ",
           c.patch_size, " squared, plus the class token) divisible by parallel.tensor.size ",
           seq_.parts(), " under parallel.tensor.sequence_parallel");
  patch_embed_ =
      register_module("patch_embed", nn::make_patch_embedding({.image_height = c.image_size,
                                                               .image_width = c.image_size,
                                                               .patch_size = c.patch_size,
                                                               .in_channels = c.in_channels,
                                                               .embed_dim = c.d_model,
                                                               .init_std = c.init_std},
                                                              ctx));
  Tensor cls = empty({1, 1, c.d_model});
  normal_(cls, 0.0, c.init_std, &gen);
  cls_token_ = register_parameter("cls_token", cls);
  Tensor pos = empty({1, c.num_patches() + 1, c.d_model});
  normal_(pos, 0.0, c.init_std, &gen);
  pos_embed_ = register_parameter("pos_embed", pos);
  drop_ = register_module("drop", std::make_shared<nn::Dropout>(c.dropout, seq_.dropout_chunk()));
  h_ = register_module("h", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < c.n_layers; ++i) {
    h_->push_back(nn::make_block({.d_model = c.d_model,
                                  .n_heads = c.n_heads,
                                  .mlp_hidden = c.mlp_hidden,
                                  .causal = false,
                                  .pre_ln = true,
                                  .ln_eps = c.ln_eps,
                                  .gelu = "none",
                                  .bias = true,
                                  .dropout = c.dropout,
                                  .attn_dropout = c.attn_dropout,
                                  .init_std = c.init_std,
                                  .checkpoint = c.checkpoint},
                                 ctx));
  }
  // The final LayerNorm is per token, so applying it to the class token alone equals ViT's.
  head_ = register_module("head", nn::make_classification_head({.d_model = c.d_model,
                                                                .num_classes = c.num_classes,
                                                                .pooling = nn::Pooling::cls,
                                                                .norm = true,
                                                                .ln_eps = c.ln_eps,
                                                                .init_std = c.init_std},
                                                               ctx));
}

Tensor ViT::forward(const Tensor& images) {
  Tensor patches = patch_embed_->forward(images);  // (B, N, D)
  const int64_t b = patches.size(0);
  Tensor cls = expand(cls_token_, {b, 1, config_.d_model});  // (B, 1, D)
  // Sequence parallel: the patches, class token and positions are computed whole on every rank
  // and cut to this rank's rows, whose backward all-gathers the serial gradient of the whole.
  Tensor x = seq_.scatter(cat({cls, patches}, 1) + pos_embed_, nn::kSequenceDim);
  x = drop_->forward(x);  // (B, N + 1, D); sequence parallel: (B, (N + 1)/P, D)
  for (size_t i = 0; i < h_->size(); ++i) x = h_->at<nn::Block>(i)->forward(x);
  // The head pools the class token (row 0): the whole sequence on every rank, head replicated.
  return head_->forward(seq_.gather(x, nn::kSequenceDim));  // (B, num_classes)
}

Tensor ViT::loss(const Tensor& images, const Tensor& labels) {
  TS_CHECK(labels.defined() && labels.dim() == 1 && images.defined() && images.dim() >= 1 &&
               labels.size(0) == images.size(0),
           "ViT.loss", "expected labels (B) for images ",
           images.defined() ? images.describe() : "undefined", ", got ",
           labels.defined() ? labels.describe() : "undefined");
  return cross_entropy(forward(images),
                       labels.dtype() == DType::i64 ? labels : labels.to(DType::i64));
}

}  // namespace tessera::vit

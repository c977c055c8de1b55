// ViT construction, forward and loss (see vit.h).
#include "models/vit/vit.h"

#include "autograd/ops.h"
#include "models/nn/parallel/shard_init.h"

namespace tessera::vit {

ViT::ViT(const ViTConfig& config, const nn::BuildContext& ctx)
    : config_(config), seq_(ctx), split2d_(ctx), split3d_(ctx), sp_(ctx) {
  config.validate();
  check_sequence_split();
  sequence_padding_ = sequence_padding();
  stage_ = plan_stages(ctx);
  // Layers this rank does not hold are built aside and dropped, in the serial order, so the
  // generator draws every held weight at its serial offset: embeddings, blocks, head.
  build_embeddings(ctx);
  drop_ = register_module("drop", nn::make_dropout(config_.dropout, ctx));
  build_blocks(ctx);
  build_head(ctx);
}

void ViT::check_sequence_split() const {
  const ViTConfig& c = config_;
  TS_CHECK((c.num_patches() + 1) % seq_.parts() == 0, "ViT",
           "expected the token sequence (num_patches + 1 = ", c.num_patches(),
           " + 1 = ", c.num_patches() + 1, ", image_size ", c.image_size, " / patch_size ",
           c.patch_size, " squared, plus the class token) divisible by parallel.tensor.size ",
           seq_.parts(), " under parallel.tensor.sequence_parallel");
}

int64_t ViT::sequence_padding() const {
  if (!sp_.on()) return 0;
  const ViTConfig& c = config_;
  const int64_t tokens = c.num_patches() + 1;
  const int64_t padding = (sp_.size() - tokens % sp_.size()) % sp_.size();
  // Dropout draws the serial masks at the serial layer's (token, feature) and (query, key)
  // counters, which a padded sequence does not have.
  TS_CHECK(padding == 0 || (c.dropout == 0.0 && c.attn_dropout == 0.0), "ViT",
           "expected dropout and attn_dropout 0 when the token sequence (num_patches + 1 = ",
           c.num_patches(), " + 1 = ", tokens, ") does not divide by parallel.sequence ",
           sp_.size(), " and is padded to ", tokens + padding, " (masked keys), got dropout ",
           c.dropout, " and attn_dropout ", c.attn_dropout,
           "; or pick an image_size / patch_size whose (image_size / patch_size)^2 + 1 divides");
  return padding;
}

// Parameter counts that balance the "parameters" partition (the embeddings on the first stage,
// the head on the last).
nn::PipelineStage ViT::plan_stages(const nn::BuildContext& ctx) const {
  const ViTConfig& c = config_;
  const int64_t d = c.d_model, hidden = c.mlp_hidden > 0 ? c.mlp_hidden : 4 * d;
  const int64_t block_params = 4 * d * d + 2 * d * hidden + hidden + 9 * d;
  const int64_t patch_params = c.in_channels * c.patch_size * c.patch_size * d + d;
  return nn::PipelineStage::plan(ctx, c.n_layers, block_params,
                                 patch_params + (c.num_patches() + 2) * d,
                                 2 * d + (d + 1) * c.num_classes);
}

// The patch embedding is drawn before the class token and positions but listed after them (a
// module's own parameters come first in named_parameters()), so it is recorded after them.
void ViT::build_embeddings(const nn::BuildContext& ctx) {
  const ViTConfig& c = config_;
  Generator& gen = ctx.generator();
  auto patch_embed = nn::make_patch_embedding({.image_height = c.image_size,
                                               .image_width = c.image_size,
                                               .patch_size = c.patch_size,
                                               .in_channels = c.in_channels,
                                               .embed_dim = c.d_model,
                                               .init_std = c.init_std},
                                              ctx);
  auto own = std::make_shared<nn::Module>();  // cls_token and pos_embed, for the stage plan
  // Under 3D each rank draws its piece along D at the serial counters (shard_init.h).
  const Shape cls_shape{1, 1, c.d_model}, pos_shape{1, c.num_patches() + 1, c.d_model};
  const parallel::tensor::Placement cls_at =
      split3d_.features_placement(cls_shape, "ViT cls_token");
  const parallel::tensor::Placement pos_at =
      split3d_.features_placement(pos_shape, "ViT pos_embed");
  auto draw = [&](const parallel::tensor::Placement& at) {
    if (split3d_.on()) return nn::normal_shard(at, 0.0, c.init_std, gen);
    Tensor t = empty(at.global_shape);
    normal_(t, 0.0, c.init_std, &gen);
    return t;
  };
  auto keep = [&](nn::Module& m, const std::string& name, const Tensor& t,
                  const parallel::tensor::Placement& at) {
    return split3d_.on() ? m.register_parameter(name, t, at) : m.register_parameter(name, t);
  };
  Tensor cls = draw(cls_at);
  keep(*own, "cls_token", cls, cls_at);
  Tensor pos = draw(pos_at);
  keep(*own, "pos_embed", pos, pos_at);
  if (stage_.holds_embeddings()) {
    cls_token_ = keep(*this, "cls_token", cls, cls_at);
    pos_embed_ = keep(*this, "pos_embed", pos, pos_at);
    stage_.hold("", *own);
    patch_embed_ = register_module("patch_embed", patch_embed);
    stage_.hold("patch_embed", *patch_embed_);
  } else {
    stage_.skip("", [&] { return own; });
    stage_.skip("patch_embed", [&] { return patch_embed; });
  }
}

void ViT::build_blocks(const nn::BuildContext& ctx) {
  const ViTConfig& c = config_;
  h_ = register_module("h", std::make_shared<nn::ModuleList>());
  auto make_block = [&] {
    return nn::make_block({.d_model = c.d_model,
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
                          ctx);
  };
  block_slot_ = stage_.build_blocks("h", *h_, c.n_layers, make_block);
}

// The final LayerNorm is per token, so applying it to the class token alone equals ViT's.
void ViT::build_head(const nn::BuildContext& ctx) {
  const ViTConfig& c = config_;
  auto make_head = [&] {
    return nn::make_classification_head({.d_model = c.d_model,
                                         .num_classes = c.num_classes,
                                         .pooling = nn::Pooling::cls,
                                         .norm = true,
                                         .ln_eps = c.ln_eps,
                                         .init_std = c.init_std},
                                        ctx);
  };
  if (stage_.holds_head()) {
    head_ = register_module("head", make_head());
    stage_.hold("head", *head_);
  } else {
    stage_.skip("head", make_head);
  }
}

Tensor ViT::embed(const Tensor& images) {
  nn::enter_dropout_unit(0);
  Tensor patches = patch_embed_->forward(images);  // (B, N, D); 2D: this rank's block; 3D: piece
  const int64_t b = patches.size(0), d = patches.size(2);
  // 2D: the class token and positions (held whole) are cut to this rank's features D / q; 3D:
  // their pieces gathered to its features D / q^2.
  Tensor cls = expand(features(cls_token_), {b, 1, d});  // (B, 1, D)
  // Sequence parallel: the patches, class token and positions are computed whole on every rank
  // and cut to this rank's rows, whose backward all-gathers the serial gradient of the whole.
  Tensor x = seq_.scatter(cat({cls, patches}, 1) + features(pos_embed_), nn::kSequenceDim);
  // parallel.sequence: when N + 1 does not divide by S, zeros are appended up to a multiple of S
  // (keys that every block masks out, rows that reach no loss).
  if (sequence_padding_ > 0) {
    const Tensor pad =
        zeros({b, sequence_padding_, x.size(2)}, {.dtype = x.dtype(), .device = x.device()});
    x = cat({x, pad}, 1);  // (B, T', D), T' a multiple of S
  }
  // parallel.sequence: likewise this rank's contiguous T'/S tokens (rank 0's start with the class
  // token); the embedding dropout draws that chunk of the serial mask.
  x = sp_.take(x, nn::kSequenceDim);
  // (B, N + 1, D); tensor.sequence_parallel: (B, (N + 1)/P, D); parallel.sequence: (B, T'/S, D)
  return drop_->forward(x);
}

Tensor ViT::features(const Tensor& param) const {
  return split3d_.on() ? split3d_.features(param) : split2d_.features(param);
}

Tensor ViT::run_blocks(Tensor x, int64_t begin, int64_t end) {
  // Under parallel.sequence with padding: the whole padded sequence's key mask (B, T'), true for
  // the class token and the patches.
  Tensor mask;
  if (sequence_padding_ > 0) {
    const int64_t tokens = config_.num_patches() + 1;
    // The whole batch's rows: 2D and 3D attention take the mask of every row of the batch.
    const int64_t b = split3d_.on() ? split3d_.batch(x) : split2d_.batch(x);
    Tensor keep = ones({b, tokens + sequence_padding_}, {.device = x.device()});
    keep.narrow(1, tokens, sequence_padding_).zero_();
    mask = ne(keep, zeros_like(keep));  // (B, T') bool
  }
  for (int64_t i = begin; i < end; ++i) {
    nn::enter_dropout_unit(i + 1);
    x = h_->at<nn::Block>(size_t(block_slot_[i]))->forward(x, mask);
  }
  return x;
}

Tensor ViT::forward(const Tensor& images) {
  TS_CHECK(!stage_.pipelined(), "ViT", "expected the whole model on this rank, got pipeline stage ",
           stage_.rank(), " of ", stage_.ranks(), " (use stage_forward)");
  return head(run_blocks(embed(images), 0, config_.n_layers));  // (B, num_classes)
}

Tensor ViT::head(const Tensor& x) {
  // parallel.sequence: the class token's final state from rank 0, as a one-token sequence for
  // the head's class-token pooling; every rank computes the same logits.
  if (sp_.on()) return head_->forward(unsqueeze(sp_.first_token(x), 1));
  // The head pools the class token (row 0): the whole sequence on every rank, head replicated.
  return head_->forward(seq_.gather(x, nn::kSequenceDim));  // (B, num_classes)
}

Tensor ViT::stage_forward(int chunk, const Tensor& input, const Tensor& labels) {
  const parallel::pipeline::BlockRange blocks = stage_.chunk_blocks(chunk);
  Tensor x = run_blocks(stage_.first_chunk(chunk) ? embed(input) : input, blocks.begin, blocks.end);
  if (!stage_.last_chunk(chunk)) return x;
  Tensor logits = head(x);  // (B, num_classes)
  if (!labels.defined()) return logits;
  return cross_entropy(logits, labels.dtype() == DType::i64 ? labels : labels.to(DType::i64));
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

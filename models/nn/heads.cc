// Classification and language-model heads (see heads.h).
#include "models/nn/heads.h"

#include "autograd/ops.h"
#include "models/nn/factory.h"
#include "models/nn/parallel/linear_3d.h"
#include "models/nn/parallel/placement_2d.h"

namespace tessera::nn {

ClassificationHead::ClassificationHead(const ClassificationHeadSpec& spec, const BuildContext& ctx)
    : spec_(spec) {
  TS_CHECK(spec.d_model > 0 && spec.num_classes > 0, "ClassificationHead",
           "expected positive d_model and num_classes, got ", spec.d_model, " and ",
           spec.num_classes);
  DropoutChunk chunk;  // the whole tensor (under sequence parallelism the head sees all of it)
  width_ = spec.d_model;
  if (ctx.tensor_2d()) {
    width_ = spec.d_model / ctx.summa_grid().q();
    chunk = dropout_chunk_2d(ctx.summa_grid());
  } else if (ctx.tensor_3d()) {
    const parallel::tensor::Cube3D cube = ctx.cube("ClassificationHead");
    width_ = spec.d_model / (int64_t(cube.q()) * cube.q());
    chunk = dropout_chunk_3d(cube);
  }
  if (spec.norm)
    norm_ =
        register_module("norm", make_layer_norm({.dim = spec.d_model, .eps = spec.ln_eps}, ctx));
  // Under 2D and 3D its input, pooled or not, is a block (a piece) of the whole batch's
  // (B, ..., C): its chunk of the serial mask.
  dropout_ = register_module("dropout", std::make_shared<Dropout>(spec.dropout, chunk));
  head_ = register_module("head", make_classifier({.in_features = spec.d_model,
                                                   .out_features = spec.num_classes,
                                                   .bias = spec.bias,
                                                   .init_std = spec.init_std},
                                                  ctx));
}

Tensor ClassificationHead::forward(const Tensor& x) {
  Tensor h = x;
  if (spec_.pooling != Pooling::none) {
    TS_CHECK(x.defined() && x.dim() == 3 && x.size(2) == width_ && x.size(1) > 0,
             "ClassificationHead", "expected tokens (B, T >= 1, ", width_, ") to pool, got ",
             x.defined() ? x.describe() : "undefined");
    h = spec_.pooling == Pooling::cls ? select(x, 1, 0) : mean(x, {1});  // (B, C)
  }
  if (norm_) h = norm_->forward(h);
  return head_->forward(dropout_->forward(h));
}

LMHead::LMHead(const LMHeadSpec& spec, Generator& gen, ParallelStyle style)
    : spec_(spec), style_(style), tied_(false) {
  TS_CHECK(spec.d_model > 0 && spec.vocab_size > 0, "LMHead",
           "expected positive d_model and vocab_size, got ", spec.d_model, " and ",
           spec.vocab_size);
  Tensor w = empty({spec.vocab_size, spec.d_model});
  normal_(w, 0.0, spec.init_std, &gen);
  weight_ = register_parameter("weight", w);
  init_bias();
}

LMHead::LMHead(const LMHeadSpec& spec, const Tensor& tied_weight, ParallelStyle style)
    : spec_(spec), style_(style), tied_(true) {
  const Shape want{spec.vocab_size, spec.d_model};
  TS_CHECK(tied_weight.defined() && tied_weight.shape() == want, "LMHead",
           "expected a tied weight of shape ", shape_str(want), ", got ",
           tied_weight.defined() ? tied_weight.describe() : "undefined");
  // Registering sets requires_grad, which the owner (e.g. an Embedding) already did.
  weight_ = register_parameter("weight", tied_weight, tied_weight.requires_grad());
  init_bias();
}

void LMHead::check_tied_to(const EmbeddingSpec& table) const {
  TS_CHECK(table.num_embeddings == spec_.vocab_size && table.dim == spec_.d_model, type_name(),
           "expected a tied embedding of (", spec_.vocab_size, ", ", spec_.d_model, "), got (",
           table.num_embeddings, ", ", table.dim, ")");
}

void LMHead::init_bias() {
  if (spec_.bias) bias_ = register_parameter("bias", zeros({spec_.vocab_size}));
}

LMHead::LMHead(const LMHeadSpec& spec, ParallelStyle style, bool tied, std::nullptr_t)
    : spec_(spec), style_(style), tied_(tied) {
  TS_CHECK(spec.d_model > 0 && spec.vocab_size > 0, "LMHead",
           "expected positive d_model and vocab_size, got ", spec.d_model, " and ",
           spec.vocab_size);
}

void LMHead::adopt(const Tensor& weight, const parallel::tensor::Placement& weight_placement,
                   const Tensor& bias, const parallel::tensor::Placement& bias_placement) {
  weight_ = tied_ ? register_parameter("weight", weight, weight.requires_grad())
                  : register_parameter("weight", weight, weight_placement);
  if (bias.defined()) bias_ = register_parameter("bias", bias, bias_placement);
}

Tensor LMHead::loss(const Tensor& x, const Tensor& targets, const CrossEntropyOptions& opts) {
  return cross_entropy(forward(x), targets, opts);
}

Tensor LMHead::forward(const Tensor& x) {
  TS_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == spec_.d_model, "LMHead",
           "expected input (..., ", spec_.d_model, "), got ",
           x.defined() ? x.describe() : "undefined");
  return linear(x, weight_, bias_);  // (..., vocab)
}

}  // namespace tessera::nn

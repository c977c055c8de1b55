// Output heads: ClassificationHead (optional pooling over tokens, LayerNorm, dropout, one Linear)
// for ViT and BERT classification, and LMHead (logits over the vocabulary, its weight usually tied
// to the token embedding).
#pragma once

#include <memory>

#include "autograd/ops.h"
#include "core/generator.h"
#include "models/nn/build_context.h"
#include "models/nn/dropout.h"
#include "models/nn/embedding.h"
#include "models/nn/layer_norm.h"
#include "models/nn/linear.h"

namespace tessera::nn {

enum class Pooling {
  none,  // keep every token: (B, T, C) -> (B, T, classes), or (B, C) -> (B, classes)
  cls,   // the first token (ViT's class token, BERT's [CLS]): (B, T, C) -> (B, classes)
  mean,  // the mean over tokens: (B, T, C) -> (B, classes)
};

struct ClassificationHeadSpec {
  int64_t d_model = 0;
  int64_t num_classes = 0;
  Pooling pooling = Pooling::none;
  bool norm =
      false;  // a LayerNorm after pooling (per token, so with cls it equals ViT's final norm)
  double ln_eps = 1e-5;
  double dropout = 0.0;  // before the linear (training only)
  bool bias = true;
  double init_std = 0.02;
};

class ClassificationHead : public Module {
 public:
  // Children: norm (when spec.norm), dropout, head (Linear), built through the factories. Under
  // 2D tensor parallelism (norm LayerNorm2D, head Classifier2D) x is this rank's 2D block
  // (B / q, T, C / q) or (B / q, C / q), under 3D (LayerNorm3D, Classifier3D) its piece
  // (B / q, T, C / q^2) or (B / q, C / q^2); the logits are the whole batch's on every rank.
  ClassificationHead(const ClassificationHeadSpec& spec, const BuildContext& ctx);
  std::string type_name() const override { return "ClassificationHead"; }

  virtual Tensor forward(const Tensor& x);

  const std::shared_ptr<Linear>& head() const { return head_; }
  const std::shared_ptr<LayerNorm>& norm() const { return norm_; }
  const ClassificationHeadSpec& spec() const { return spec_; }

 private:
  ClassificationHeadSpec spec_;
  int64_t width_ = 0;  // the input's features on this rank (d_model; 2D: d_model / q; 3D: / q^2)
  std::shared_ptr<LayerNorm> norm_;
  std::shared_ptr<Dropout> dropout_;
  std::shared_ptr<Linear> head_;
};

struct LMHeadSpec {
  int64_t d_model = 0;
  int64_t vocab_size = 0;
  bool bias = false;
  double init_std = 0.02;
};

class LMHead : public Module {
 public:
  // Its own weight (vocab, d_model) drawn from N(0, init_std).
  LMHead(const LMHeadSpec& spec, Generator& gen, ParallelStyle style = ParallelStyle::none);
  // Tied: registers `tied_weight` (vocab, d_model), e.g. the token embedding's weight, as its own
  // "weight" parameter; both modules then hold one tensor whose gradient sums both uses.
  LMHead(const LMHeadSpec& spec, const Tensor& tied_weight,
         ParallelStyle style = ParallelStyle::none);
  std::string type_name() const override { return "LMHead"; }

  // (..., d_model) -> (..., vocab)
  virtual Tensor forward(const Tensor& x);
  // cross_entropy(forward(x), targets): the loss goes through the head, so a vocab-parallel twin
  // computes it from its shard of the logits without gathering them.
  virtual Tensor loss(const Tensor& x, const Tensor& targets, const CrossEntropyOptions& opts = {});

  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }
  bool tied() const { return tied_; }
  const LMHeadSpec& spec() const { return spec_; }
  ParallelStyle parallel_style() const { return style_; }

 protected:
  // For the vocab-parallel twin: the spec without a weight; adopt() registers the shard (tied: the
  // embedding's shard itself) and the bias shard (when spec.bias).
  LMHead(const LMHeadSpec& spec, ParallelStyle style, bool tied, std::nullptr_t);
  void adopt(const Tensor& weight, const parallel::tensor::Placement& weight_placement,
             const Tensor& bias, const parallel::tensor::Placement& bias_placement);
  // A twin tied to an embedding's shard checks the whole tables agree: (vocab, d_model).
  void check_tied_to(const EmbeddingSpec& table) const;

 private:
  void init_bias();

  LMHeadSpec spec_;
  ParallelStyle style_;
  bool tied_;
  Tensor weight_, bias_;
};

}  // namespace tessera::nn

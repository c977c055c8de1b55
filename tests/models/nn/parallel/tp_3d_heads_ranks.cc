// Multi-rank program run by tp_3d_test.sh: the 3D layers BERT and ViT need beyond GPT's on a
// q x q x q cube (P = q^3 ranks) against their serial twins from the same seed. Classifier3D,
// PatchEmbedding3D and the ClassificationHead built under mode 3d (pooled over the class token or
// the mean, with its LayerNorm, with dropout): the output, the input gradient and every parameter
// (value bit for bit, gradient gathered by placement) within 1e-5 relative. Then whole ViTs and
// BERTs (masked LM tied to the word embeddings plus sequence classification, padding masks, token
// types) built by configuration alone: the loss, every gradient, the gradient norm as clipping sums
// it, the serial-named state gathered from the pieces, and in eval mode the logits. Errors name the
// numbers that do not split. A failure aborts the job.
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "core/factory.h"
#include "models/bert/bert.h"
#include "models/nn/factory.h"
#include "models/nn/nn.h"
#include "models/nn/parallel/linear_3d.h"
#include "models/vit/vit.h"
#include "parallel/comm/mpi_runtime.h"
#include "parallel/mesh/parallel_context.h"
#include "parallel/tensor/cube_3d.h"
#include "tests/models/nn/parallel/twin_checks.h"
#include "tests/models/nn/parallel/twin_fixture.h"
#include "tests/models/nn/parallel/twin_models.h"
#include "tests/parallel/rank_check.h"

using namespace tessera;
using parallel::ParallelContext;
using parallel::tensor::Cube3D;
using parallel::tensor::gather_3d;
using parallel::tensor::split_3d;

using namespace parallel::testing;  // the twin fixture (twin_*.h) and RANK_CHECK's counter

namespace {

// make_classifier under mode 3d against the serial Linear: tokens (B, T, in) or pooled (B, in),
// with and without a bias; the output is the whole batch's logits on every rank.
void check_classifier(const ParallelContext& ctx, bool tokens, bool bias) {
  const Cube3D cube = cube_of(ctx);
  const int q = cube.q();
  const std::string what =
      str_cat("Classifier3D", tokens ? " tokens" : " pooled", bias ? "" : " no bias", on_cube(q));
  const nn::LinearSpec spec{
      .in_features = 2 * q * q * q, .out_features = 5, .bias = bias, .init_std = 0.5};
  const auto [serial, twin] = make_twins(
      ctx, 21, what, [&](const nn::BuildContext& b) { return nn::make_classifier(spec, b); });
  RANK_CHECK(twin->type_name() == "Classifier3D", what, ": built ", twin->type_name());
  const Shape shape = tokens ? Shape{2 * q, 3, spec.in_features} : Shape{2 * q, spec.in_features};
  Shape out = shape;
  out.back() = spec.out_features;
  check_pass(
      smooth(shape, 31), [&](const Tensor& xs) { return serial->forward(xs); },
      [&](const Tensor& xt) { return twin->forward(split_3d(xt, cube)); },
      weighted_by(smooth(out, 32)), what, {.output = " logits"});
  check_params(*twin, *serial, ctx, what, /*replicated_ok=*/true);  // the bias
}

// make_patch_embedding under mode 3d against the serial layer: 8 x 8 images of 3 channels in 4 x 4
// patches (48 features, q^2 chunks of them), images that require grad.
void check_patch_embedding(const ParallelContext& ctx) {
  const Cube3D cube = cube_of(ctx);
  const int q = cube.q();
  const std::string what = str_cat("PatchEmbedding3D", on_cube(q));
  const nn::PatchEmbeddingSpec spec{.image_height = 8,
                                    .image_width = 8,
                                    .patch_size = 4,
                                    .in_channels = 3,
                                    .embed_dim = 2 * q * q * q,
                                    .init_std = 0.5};
  const auto [serial, twin] = make_twins(
      ctx, 23, what, [&](const nn::BuildContext& b) { return nn::make_patch_embedding(spec, b); });
  RANK_CHECK(twin->type_name() == "PatchEmbedding3D" && twin->proj()->type_name() == "Linear3D",
             what, ": built ", twin->type_name(), " with ", twin->proj()->type_name());
  Tensor pt;  // this rank's piece of the patches
  const Tensor ys =
      check_pass(
          smooth({2 * q, 3, 8, 8}, 33), [&](const Tensor& xs) { return serial->forward(xs); },
          [&](const Tensor& xt) { return gather_3d(pt = twin->forward(xt), cube); },
          weighted_by(smooth({2 * q, 4, spec.embed_dim}, 34)), what, {.input = " image gradient"})
          .first;
  check_close(pt, piece(ys.detach(), cube.coords()), what + " piece");
  check_params(*twin, *serial, ctx, what);
}

// make_classification_head under mode 3d against the serial head: ViT's (class token, LayerNorm),
// a mean-pooled one with dropout, BERT's (pooled input, dropout).
void check_classification_head(const ParallelContext& ctx, nn::Pooling pooling, bool norm,
                               double dropout) {
  const Cube3D cube = cube_of(ctx);
  const int q = cube.q();
  const char* pooled = pooling == nn::Pooling::cls    ? " cls"
                       : pooling == nn::Pooling::mean ? " mean"
                                                      : " none";
  const std::string what =
      str_cat("ClassificationHead", pooled, norm ? " norm" : "", " dropout ", dropout, on_cube(q));
  const nn::ClassificationHeadSpec spec{.d_model = 2 * q * q * q,
                                        .num_classes = 3,
                                        .pooling = pooling,
                                        .norm = norm,
                                        .dropout = dropout,
                                        .init_std = 0.5};
  const auto [serial, twin] = make_twins(ctx, 25, what, [&](const nn::BuildContext& b) {
    return nn::make_classification_head(spec, b);
  });
  RANK_CHECK(twin->head()->type_name() == "Classifier3D" &&
                 (!norm || twin->norm()->type_name() == "LayerNorm3D"),
             what, ": built ", twin->head()->type_name());
  const Shape shape =
      pooling == nn::Pooling::none ? Shape{2 * q, spec.d_model} : Shape{2 * q, 5, spec.d_model};
  check_pass(
      smooth(shape, 35, 1.0, 0.3), [&](const Tensor& xs) { return serial->forward(xs); },
      [&](const Tensor& xt) { return twin->forward(split_3d(xt, cube)); },
      weighted_by(smooth({2 * q, spec.num_classes}, 36)), what, {.output = " logits"});
  check_params(*twin, *serial, ctx, what, /*replicated_ok=*/true);
}

// A whole ViT under mode 3d: the loss and every gradient (the class token and positions in q^3
// pieces along D, only the classifier's bias replicated), then the eval logits.
void check_vit(const ParallelContext& ctx, double dropout) {
  const int q = cube_of(ctx).q();
  const std::string what = str_cat("ViT dropout ", dropout, on_cube(q));
  const vit::ViTConfig c{.image_size = 8,
                         .patch_size = 4,  // 4 patches + the class token
                         .in_channels = 3,
                         .num_classes = 5,
                         .n_layers = 2,
                         .n_heads = q * q,
                         .d_model = 2 * q * q * q,
                         .dropout = dropout,
                         .attn_dropout = dropout};
  const auto [serial, twin] = make_twins_of<vit::ViT>(ctx, 7, what, c);
  RANK_CHECK(twin->cls_token().numel() * q * q * q == c.d_model, what, ": class token of ",
             twin->cls_token().numel(), " elements on this rank");
  const auto x = vit_batch(c, 2 * q);
  check_train_step(
      *serial, *twin, [&](vit::ViT& m) { return m.loss(x.images, x.labels); }, what);
  check_trained(*twin, *serial, ctx, what, /*replicated_ok=*/true);  // the classifier's bias
  check_eval_logits(*serial, *twin, x.images, what);
}

// A whole BERT under mode 3d: the masked-LM plus classification loss over a batch with padding,
// with and without token types, every gradient; then the eval hidden states (this rank's piece)
// and both heads' logits.
void check_bert(const ParallelContext& ctx, double dropout, bool token_types) {
  const Cube3D cube = cube_of(ctx);
  const int q = cube.q();
  const std::string what =
      str_cat("BERT dropout ", dropout, token_types ? " token types" : "", on_cube(q));
  const bert::BertConfig c{.vocab_size = 5 * q * q * q,  // the decoder's bias is a 3D vector
                           .max_positions = 16,
                           .n_layers = 2,
                           .n_heads = q * q,
                           .d_model = 2 * q * q * q,
                           .mlp_hidden = 4 * q * q * q,
                           .dropout = dropout,
                           .attn_dropout = dropout,
                           .num_labels = 3};  // does not split over the cube
  const auto [serial, twin] = make_twins_of<bert::Bert>(ctx, 7, what, c);
  const auto x = bert_batch(
      c, {.b = 2 * q, .t = 8, .token_types = token_types, .pad_second = 5, .pad_last = 6});
  check_train_step(
      *serial, *twin, [&](bert::Bert& m) { return bert_loss(m, x); }, what);
  check_trained(*twin, *serial, ctx, what, /*replicated_ok=*/true);  // the classifier's bias
  const auto s = bert_eval(*serial, x), t = bert_eval(*twin, x);
  check_close(t.hidden, piece(s.hidden, cube.coords()), what + " hidden states piece");
  check_close(t.mlm_logits, s.mlm_logits, what + " masked-LM logits");
  check_close(t.class_logits, s.class_logits, what + " classification logits");
}

// Sizes that do not split are refused by every rank before any collective, naming the numbers.
void check_errors(const ParallelContext& ctx) {
  const Cube3D cube = cube_of(ctx);
  const int q = cube.q();
  Generator gen(0);
  const nn::BuildContext bctx(gen, &ctx);
  reset_stats({cube.input, cube.weight, cube.output});
  std::string e =
      error_of([&] { nn::make_classifier({.in_features = q * q, .out_features = 3}, bctx); });
  RANK_CHECK(e.find("[Classifier3D]") != std::string::npos && e.find("q^3") != std::string::npos,
             "Classifier3D error: '", e, "'");
  e = error_of([&] {
    nn::make_patch_embedding({.image_height = 6,
                              .image_width = 6,
                              .patch_size = 3,
                              .in_channels = 3,
                              .embed_dim = q * q * q},
                             bctx);
  });
  RANK_CHECK(e.find("[PatchEmbedding3D]") != std::string::npos &&
                 e.find("3 x patch_size 3^2 = 27") != std::string::npos,
             "PatchEmbedding3D error: '", e, "'");
  auto patches = nn::make_patch_embedding(
      {.image_height = 4, .image_width = 4, .patch_size = 2, .embed_dim = q * q * q}, bctx);
  e = error_of([&] { patches->forward(smooth({q + 1, 3, 4, 4}, 1)); });
  RANK_CHECK(e.find("[PatchEmbedding3D]") != std::string::npos &&
                 e.find(str_cat("divisible by the 3D cube side q = ", q)) != std::string::npos,
             "PatchEmbedding3D batch error: '", e, "'");
  check_nothing_moved({cube.input, cube.weight, cube.output});
}

}  // namespace

int main(int argc, char** argv) {
  return parallel::run_distributed(
      argc, argv, [](const std::shared_ptr<parallel::Communicator>& world) {
        ParallelContext ctx(cube_config(world->size(), "tp_3d_heads_ranks"), world);
        const int q = cube_of(ctx).q();
        check_errors(ctx);
        for (const bool tokens : {true, false})
          for (const bool bias : {true, false}) check_classifier(ctx, tokens, bias);
        check_patch_embedding(ctx);
        check_classification_head(ctx, nn::Pooling::cls, /*norm=*/true, 0.0);
        check_classification_head(ctx, nn::Pooling::mean, /*norm=*/true, 0.2);
        check_classification_head(ctx, nn::Pooling::none, /*norm=*/false, 0.2);
        check_vit(ctx, 0.0);
        check_vit(ctx, 0.1);
        check_bert(ctx, 0.0, /*token_types=*/false);
        check_bert(ctx, 0.1, /*token_types=*/true);
        world->barrier()->wait();
        if (world->rank() == 0)
          std::printf(
              "tp 3d heads: all checks passed on %d x %d x %d ranks (%lld checks on rank 0)\n", q,
              q, q, static_cast<long long>(checks_passed()));
        return 0;
      });
}

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
#include "tests/parallel/rank_check.h"

using namespace tessera;
using parallel::ParallelContext;
using parallel::tensor::Cube3D;
using parallel::tensor::gather_3d;
using parallel::tensor::split_3d;

using parallel::testing::check_close;
using parallel::testing::check_grad_norm;
using parallel::testing::check_params;
using parallel::testing::check_state;
using parallel::testing::leaf;
using parallel::testing::piece;
using parallel::testing::smooth;

namespace {

Cube3D cube_of(const ParallelContext& ctx) {
  Generator unused(0);
  return nn::cube_of(nn::BuildContext(unused, &ctx), "test");
}

std::string on_cube(int q) { return str_cat(" on ", q, " x ", q, " x ", q); }

// make_classifier under mode 3d against the serial Linear: tokens (B, T, in) or pooled (B, in),
// with and without a bias; the output is the whole batch's logits on every rank.
void check_classifier(const ParallelContext& ctx, bool tokens, bool bias) {
  const Cube3D cube = cube_of(ctx);
  const int q = cube.q();
  const std::string what =
      str_cat("Classifier3D", tokens ? " tokens" : " pooled", bias ? "" : " no bias", on_cube(q));
  const nn::LinearSpec spec{
      .in_features = 2 * q * q * q, .out_features = 5, .bias = bias, .init_std = 0.5};
  Generator g1(21), g2(21);
  auto serial = nn::make_classifier(spec, g1);
  auto twin = nn::make_classifier(spec, nn::BuildContext(g2, &ctx));
  RANK_CHECK(twin->type_name() == "Classifier3D", what, ": built ", twin->type_name());
  RANK_CHECK(g1.offset() == g2.offset(), what, ": the twin drew ", g2.offset(),
             " counters, the serial ", g1.offset());
  const Shape shape = tokens ? Shape{2 * q, 3, spec.in_features} : Shape{2 * q, spec.in_features};
  const Tensor x = smooth(shape, 31);
  Shape out = shape;
  out.back() = spec.out_features;
  const Tensor gy = smooth(out, 32);
  Tensor xs = leaf(x), xt = leaf(x);
  const Tensor ys = serial->forward(xs);
  autograd::backward({sum(mul(ys, gy))});
  const Tensor yt = twin->forward(split_3d(xt, cube));
  check_close(yt, ys, what + " logits");
  autograd::backward({sum(mul(yt, gy))});
  check_close(xt.grad(), xs.grad(), what + " input gradient");
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
  Generator g1(23), g2(23);
  auto serial = nn::make_patch_embedding(spec, g1);
  auto twin = nn::make_patch_embedding(spec, nn::BuildContext(g2, &ctx));
  RANK_CHECK(twin->type_name() == "PatchEmbedding3D" && twin->proj()->type_name() == "Linear3D",
             what, ": built ", twin->type_name(), " with ", twin->proj()->type_name());
  RANK_CHECK(g1.offset() == g2.offset(), what, ": the twin drew ", g2.offset(),
             " counters, the serial ", g1.offset());
  const Tensor x = smooth({2 * q, 3, 8, 8}, 33);
  const Tensor gy = smooth({2 * q, 4, spec.embed_dim}, 34);
  Tensor xs = leaf(x), xt = leaf(x);
  const Tensor ys = serial->forward(xs);
  autograd::backward({sum(mul(ys, gy))});
  const Tensor pt = twin->forward(xt);
  check_close(pt, piece(ys.detach(), cube.coords()), what + " piece");
  const Tensor yt = gather_3d(pt, cube);
  check_close(yt, ys, what + " output");
  autograd::backward({sum(mul(yt, gy))});
  check_close(xt.grad(), xs.grad(), what + " image gradient");
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
  Generator g1(25), g2(25);
  auto serial = nn::make_classification_head(spec, g1);
  auto twin = nn::make_classification_head(spec, nn::BuildContext(g2, &ctx));
  RANK_CHECK(twin->head()->type_name() == "Classifier3D" &&
                 (!norm || twin->norm()->type_name() == "LayerNorm3D"),
             what, ": built ", twin->head()->type_name());
  const Shape shape =
      pooling == nn::Pooling::none ? Shape{2 * q, spec.d_model} : Shape{2 * q, 5, spec.d_model};
  const Tensor x = smooth(shape, 35, 1.0, 0.3);
  const Tensor gy = smooth({2 * q, spec.num_classes}, 36);
  Tensor xs = leaf(x), xt = leaf(x);
  manual_seed(5);
  const Tensor ys = serial->forward(xs);
  autograd::backward({sum(mul(ys, gy))});
  manual_seed(5);
  const Tensor yt = twin->forward(split_3d(xt, cube));
  check_close(yt, ys, what + " logits");
  autograd::backward({sum(mul(yt, gy))});
  check_close(xt.grad(), xs.grad(), what + " input gradient");
  check_params(*twin, *serial, ctx, what, /*replicated_ok=*/true);
}

vit::ViTConfig tiny_vit(int q, double dropout) {
  vit::ViTConfig c;
  c.image_size = 8;
  c.patch_size = 4;  // 4 patches + the class token
  c.in_channels = 3;
  c.num_classes = 5;
  c.n_layers = 2;
  c.n_heads = q * q;
  c.d_model = 2 * q * q * q;
  c.dropout = dropout;
  c.attn_dropout = dropout;
  return c;
}

// A whole ViT under mode 3d: the loss and every gradient (the class token and positions in q^3
// pieces along D, only the classifier's bias replicated), then the eval logits.
void check_vit(const ParallelContext& ctx, double dropout) {
  const int q = cube_of(ctx).q();
  const std::string what = str_cat("ViT dropout ", dropout, on_cube(q));
  const vit::ViTConfig c = tiny_vit(q, dropout);
  Generator g_serial(7), g_twin(7);
  vit::ViT serial(c, g_serial);
  vit::ViT twin(c, nn::BuildContext(g_twin, &ctx));
  RANK_CHECK(g_serial.offset() == g_twin.offset(), what, ": the twin drew ", g_twin.offset(),
             " counters, the serial ", g_serial.offset());
  RANK_CHECK(twin.cls_token().numel() * q * q * q == c.d_model, what, ": class token of ",
             twin.cls_token().numel(), " elements on this rank");
  Generator data(11);
  const int64_t b = 2 * q;
  Tensor images = randn({b, 3, c.image_size, c.image_size}, {}, &data);
  Tensor labels = randint(0, c.num_classes, {b}, {.dtype = DType::i64}, &data);
  manual_seed(5);
  Tensor want = serial.loss(images, labels);
  autograd::backward({want});
  manual_seed(5);
  Tensor got = twin.loss(images, labels);
  autograd::backward({got});
  check_close(got, want, what + " loss");
  check_params(twin, serial, ctx, what, /*replicated_ok=*/true);  // the classifier's bias
  check_grad_norm(twin, serial, ctx, what);
  check_state(twin, serial, ctx, what);
  autograd::NoGradGuard no_grad;
  serial.eval();
  twin.eval();
  check_close(twin.forward(images), serial.forward(images), what + " logits");
}

bert::BertConfig tiny_bert(int q, double dropout) {
  bert::BertConfig c;
  c.vocab_size = 5 * q * q * q;  // the decoder's bias is a 3D vector
  c.max_positions = 16;
  c.n_layers = 2;
  c.n_heads = q * q;
  c.d_model = 2 * q * q * q;
  c.mlp_hidden = 4 * q * q * q;
  c.dropout = dropout;
  c.attn_dropout = dropout;
  c.num_labels = 3;  // does not split over the cube
  return c;
}

// A whole BERT under mode 3d: the masked-LM plus classification loss over a batch with padding,
// with and without token types, every gradient; then the eval hidden states (this rank's piece)
// and both heads' logits.
void check_bert(const ParallelContext& ctx, double dropout, bool token_types) {
  const Cube3D cube = cube_of(ctx);
  const int q = cube.q();
  const std::string what =
      str_cat("BERT dropout ", dropout, token_types ? " token types" : "", on_cube(q));
  const bert::BertConfig c = tiny_bert(q, dropout);
  Generator g_serial(7), g_twin(7);
  bert::Bert serial(c, g_serial);
  bert::Bert twin(c, nn::BuildContext(g_twin, &ctx));
  RANK_CHECK(g_serial.offset() == g_twin.offset(), what, ": the twin drew ", g_twin.offset(),
             " counters, the serial ", g_serial.offset());
  Generator data(11);
  const int64_t b = 2 * q, t = 8;
  Tensor ids = randint(0, c.vocab_size, {b, t}, {.dtype = DType::i64}, &data);
  Tensor types =
      token_types ? randint(0, c.type_vocab_size, {b, t}, {.dtype = DType::i64}, &data) : Tensor();
  Tensor mask = ones({b, t}, {.dtype = DType::i64});
  mask.narrow(0, 1, 1).narrow(1, 5, t - 5).fill_(0);
  mask.narrow(0, b - 1, 1).narrow(1, 6, t - 6).fill_(0);
  Tensor labels = randint(0, c.vocab_size, {b, t}, {.dtype = DType::i64}, &data);
  labels.narrow(1, 0, 3).fill_(-100);
  Tensor classes = randint(0, c.num_labels, {b}, {.dtype = DType::i64}, &data);
  auto loss = [&](bert::Bert& m) {
    Tensor h = m.forward(ids, types, mask);
    return m.mlm_loss(h, labels) + m.classification_loss(h, classes);
  };
  manual_seed(5);
  Tensor want = loss(serial);
  autograd::backward({want});
  manual_seed(5);
  Tensor got = loss(twin);
  autograd::backward({got});
  check_close(got, want, what + " loss");
  check_params(twin, serial, ctx, what, /*replicated_ok=*/true);  // the classifier's bias
  check_grad_norm(twin, serial, ctx, what);
  check_state(twin, serial, ctx, what);
  autograd::NoGradGuard no_grad;
  serial.eval();
  twin.eval();
  Tensor hs = serial.forward(ids, types, mask), ht = twin.forward(ids, types, mask);
  check_close(ht, piece(hs, cube.coords()), what + " hidden states piece");
  check_close(twin.mlm_logits(ht), serial.mlm_logits(hs), what + " masked-LM logits");
  check_close(twin.classify(ht), serial.classify(hs), what + " classification logits");
}

template <typename Fn>
std::string error_of(Fn&& fn) {
  return parallel::testing::value_error_of(std::forward<Fn>(fn));
}

// Sizes that do not split are refused by every rank before any collective, naming the numbers.
void check_errors(const ParallelContext& ctx) {
  const Cube3D cube = cube_of(ctx);
  const int q = cube.q();
  Generator gen(0);
  const nn::BuildContext bctx(gen, &ctx);
  for (const auto& group : {cube.input, cube.weight, cube.output}) group->reset_stats();
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
  for (const auto& group : {cube.input, cube.weight, cube.output})
    RANK_CHECK(group->stats().total().calls == 0, "a refused call moved something on ",
               group->name());
}

}  // namespace

int main(int argc, char** argv) {
  return parallel::run_distributed(
      argc, argv, [](const std::shared_ptr<parallel::Communicator>& world) {
        const int n = world->size();
        const int q = int(std::lround(std::cbrt(double(n))));
        RANK_CHECK(q * q * q == n && q > 1,
                   "tp_3d_heads_ranks runs on a cube number of ranks > 1, got ", n);
        parallel::ParallelConfig config;
        config.tensor.size = n;
        config.tensor.mode = "3d";
        ParallelContext ctx(config, world);
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
              q, q, static_cast<long long>(parallel::testing::checks_passed()));
        return 0;
      });
}

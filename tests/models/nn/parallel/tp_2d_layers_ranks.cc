// Multi-rank program run by tp_2d_test.sh: the 2D (SUMMA) twins of the layers around the MLP on a
// q x q grid (P = q^2 ranks), or of 2.5D of depth 2 (2 q^2 ranks: each depth layer on its batch
// slice), against the serial layers from the same seed: dropout's 2D chunk of
// the serial mask, multi-head attention (causal, key-padding mask, dropout), the vocab-parallel and
// hidden-split embeddings, the LM head (tied and untied, bias, padded vocabulary) and its 2D
// vocab-parallel cross-entropy, the classification head (pooling, LayerNorm2D, dropout,
// Classifier2D), the patch embedding and whole blocks (pre- and post-LN) built by the factories.
// Outputs (gathered), input gradients and every parameter gradient (gathered by placement) within
// 1e-5 relative; the generators advance as the serial layers'. A failure aborts the job.
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "core/factory.h"
#include "models/nn/nn.h"
#include "models/nn/parallel/attention_2d.h"
#include "models/nn/parallel/classifier_2d.h"
#include "models/nn/parallel/patch_embedding_2d.h"
#include "models/nn/parallel/placement_2d.h"
#include "models/nn/parallel/vocab_2d.h"
#include "parallel/comm/mpi_runtime.h"
#include "parallel/mesh/parallel_context.h"
#include "parallel/tensor/summa.h"
#include "parallel/tensor/vocab_cross_entropy_2d.h"
#include "tests/models/nn/parallel/twin_checks.h"
#include "tests/models/nn/parallel/twin_fixture.h"
#include "tests/parallel/rank_check.h"

using namespace tessera;
using parallel::CommKind;
using parallel::CommStats;
using parallel::ParallelContext;
using parallel::tensor::gather_2d;
using parallel::tensor::split_2d;
using parallel::tensor::SummaGrid;

using namespace parallel::testing;  // the twin fixture (twin_*.h) and RANK_CHECK's counter

namespace {

// Dropout with the 2D chunk: this rank's block of the serial dropout of the whole tensor, forward
// and backward exactly, the generator advanced by the whole tensor's counters.
void check_dropout(const ParallelContext& ctx) {
  const SummaGrid g = grid_of(ctx);
  const int q = g.q(), bp = g.batch_parts();
  const std::string what = "Dropout 2D chunk" + on_grid(g);
  for (const Shape& shape : {Shape{2 * bp, 5, 3 * q}, Shape{3 * bp, 2 * q}}) {
    const Tensor x = smooth(shape, 61);
    nn::Dropout serial(0.3);
    nn::Dropout twin(0.3, nn::dropout_chunk_2d(g));
    Tensor xs = leaf(x), xt = leaf(block(x, g));
    manual_seed(21);
    Tensor ys = serial.forward(xs);
    const uint64_t serial_offset = default_generator().offset();
    autograd::backward({sum(ys)});
    manual_seed(21);
    Tensor yt = twin.forward(xt);
    RANK_CHECK(default_generator().offset() == serial_offset, what, ": the twin reserved ",
               default_generator().offset(), " counters, the serial ", serial_offset);
    autograd::backward({sum(yt)});
    RANK_CHECK(rel_error(yt, block(ys.detach(), g)) == 0.0, what, ": mask differs");
    RANK_CHECK(rel_error(xt.grad(), block(xs.grad(), g)) == 0.0, what, ": gradient differs");
  }
}

// Multi-head attention from make_attention against the serial layer, through split_2d / gather_2d
// from the whole input: output, input gradient, every parameter; dropout masks by global index.
void check_attention(const ParallelContext& ctx, bool causal, bool masked, double dropout) {
  const SummaGrid g = grid_of(ctx);
  const int q = g.q();
  const std::string what = str_cat("MultiHeadAttention2D", causal ? " causal" : "",
                                   masked ? " masked" : "", " dropout ", dropout, on_grid(g));
  const nn::AttentionSpec spec{.d_model = 2 * q * q,
                               .n_heads = 2 * q,
                               .causal = causal,
                               .attn_dropout = dropout,
                               .resid_dropout = dropout,
                               .init_std = 0.3,
                               .residual_layers = 2};
  const auto [serial, twin] = make_twins(
      ctx, 7, what, [&](const nn::BuildContext& b) { return nn::make_attention(spec, b); });
  RANK_CHECK(twin->type_name() == "MultiHeadAttention2D" &&
                 twin->c_attn()->type_name() == "Linear2D" &&
                 twin->c_proj()->type_name() == "Linear2D",
             what, ": make_attention gave ", twin->type_name());
  const int64_t b = 2 * g.batch_parts(), t = 6;
  const Tensor x = smooth({b, t, spec.d_model}, 71);
  Tensor mask;
  if (masked) {
    mask = ones({b, t}, {.dtype = DType::b8});
    mask.narrow(0, 1, 1).narrow(1, 4, 2).fill_(0);
    mask.narrow(0, b - 1, 1).narrow(1, 3, 3).fill_(0);
  }
  check_pass(
      x, [&](const Tensor& xs) { return serial->forward(xs, mask); },
      [&](const Tensor& xt) { return gather_2d(twin->forward(split_2d(xt, g), mask), g); },
      weighted_by(smooth(x.shape(), 72)), what);
  check_params(*twin, *serial, ctx, what);
}

// What check_embeddings' lookups move (vocab_2d.h), f32, each way: `ids` (the whole batch's
// B T), row `id` and T positions (the hidden-split table only).
//   VocabParallelEmbedding2D  the layer's (B / d, T, C / q) partial rows reduce-scattered over the
//                             column group (backward all-gathered), the row all-reduced there
//                             both ways; under 2.5D its table's block (V_pad / q, C / q) summed
//                             over the depth group once: the lookup and the row share its replica
//   Embedding2D               over the column group, the table's (V, C / q) for the ids, then
//                             (1, C / q) for the row and (T, C / q) for the positions: only the
//                             rows looked up, not the table's V; under 2.5D each one's depth sum
GridVolume embedding_volume_2d(bool vocab, bool backward, const SummaGrid& g,
                               const nn::EmbeddingSpec& spec, int64_t ids, int64_t positions) {
  const int q = g.q(), d = g.depth();
  const int64_t block = spec.dim / q * 4, shard = block / q;  // bytes of a row's C / q, C / q^2
  GridVolume v;
  if (vocab) {
    ring(v.col, backward ? CommKind::all_gather : CommKind::reduce_scatter, q, ids / d * block);
    ring(v.col, CommKind::all_reduce, q, block);
    const int64_t padded = (spec.num_embeddings + q * q - 1) / (q * q) * (q * q);
    if (backward && d > 1) ring(v.dep, CommKind::all_reduce, d, padded / q * block);
    return v;
  }
  for (const int64_t rows : {spec.num_embeddings, int64_t(1), positions}) {
    ring(v.col, backward ? CommKind::reduce_scatter : CommKind::all_gather, q, rows * block);
    if (backward && d > 1) ring(v.dep, CommKind::all_reduce, d, rows * shard);
  }
  return v;
}

// The token table (vocab-parallel, padded vocabulary), positions and token types (hidden split),
// each against the serial Embedding: lookups, rows and every table gradient; the bytes each group
// moves, forward and backward.
void check_embeddings(const ParallelContext& ctx) {
  const SummaGrid g = grid_of(ctx);
  const int q = g.q(), s = g.grid_col();
  const int64_t b = 2 * g.batch_parts(), t = 5, c = 3 * q * q;
  Generator data(3);
  const Tensor ids = randint(0, 37, {b, t}, {.dtype = DType::i64}, &data);
  const Tensor pos = arange(0, double(t), 1.0, {.dtype = DType::i64});
  for (auto style : {nn::ParallelStyle::vocab, nn::ParallelStyle::none}) {
    const bool vocab = style == nn::ParallelStyle::vocab;
    const std::string what =
        str_cat(vocab ? "VocabParallelEmbedding2D" : "Embedding2D", " (37 ids)", on_grid(g));
    const nn::EmbeddingSpec spec{.num_embeddings = 37, .dim = c, .init_std = 0.5};
    const auto [serial, twin] = make_twins(ctx, 8, what, [&](const nn::BuildContext& b) {
      return nn::make_embedding(spec, b, style);
    });
    RANK_CHECK(twin->type_name() == (vocab ? "VocabParallelEmbedding2D" : "Embedding2D"), what,
               ": make_embedding gave ", twin->type_name());
    // Token ids (B, T) -> the block; plus row 3 broadcast over the batch, as BERT's type 0.
    const Tensor gy = smooth({b, t, c}, 81);
    reset(g);
    Tensor ys = add(serial->forward(ids), serial->row(3));
    Tensor yt = add(twin->forward(ids), twin->row(3));
    Tensor ps, pt;
    if (!vocab) {
      // Positions (T): the grid column's features, added to every row of its batch chunk.
      ps = serial->forward(pos), pt = twin->forward(pos);
    }
    check_volume(g, embedding_volume_2d(vocab, false, g, spec, b * t, t), what + " forward");
    check_close(gather_2d(yt, g), ys, what + " lookup");
    if (!vocab) {
      check_close(pt, ps.narrow(1, s * (c / q), c / q), what + " positions");
      ys = add(ys, ps);
      yt = add(yt, pt);
    }
    autograd::backward({sum(mul(ys, gy))});
    reset(g);
    autograd::backward({sum(mul(yt, block(gy, g)))});
    check_volume(g, embedding_volume_2d(vocab, true, g, spec, b * t, t), what + " backward");
    check_params(*twin, *serial, ctx, what);
  }
}

// What check_lm_head's step sums over the depth group (2.5D), f32: the table blocks
// (V_pad / q, C / q) once when tied (the lookup and the head share one replica, so their gradients
// meet before the sum), one each when not; the bias shard (V_pad / q^2).
CommStats depth_sums(const SummaGrid& g, bool tied, bool bias, int64_t v, int64_t c) {
  const int q = g.q();
  const int64_t padded = (v + q * q - 1) / (q * q) * (q * q);
  CommStats s;
  for (int n = 0; n < (tied ? 1 : 2); ++n)
    ring(s, CommKind::all_reduce, g.depth(), padded / q * (c / q) * 4);
  if (bias) ring(s, CommKind::all_reduce, g.depth(), padded / (q * q) * 4);
  return s;
}

// An embedding and an LM head (tied to it or its own, with or without a bias) on a padded
// vocabulary: the loss (mean over the labelled targets, or with label smoothing), the logits
// gathered for evaluation, every gradient.
void check_lm_head(const ParallelContext& ctx, bool tied, bool bias, double smoothing) {
  const SummaGrid g = grid_of(ctx);
  const int q = g.q();
  const std::string what = str_cat("VocabParallelLMHead2D", tied ? " tied" : " untied",
                                   bias ? " bias" : "", " smoothing ", smoothing, on_grid(g));
  const int64_t v = 37, c = 2 * q * q, b = 2 * g.batch_parts(), t = 4;
  struct Pair {
    std::shared_ptr<nn::Embedding> emb;
    std::shared_ptr<nn::LMHead> head;
    std::shared_ptr<nn::Module> all = std::make_shared<nn::Module>();
  };
  auto build = [&](const nn::BuildContext& bctx) {
    Pair p;
    p.emb = nn::make_embedding({.num_embeddings = v, .dim = c}, bctx, nn::ParallelStyle::vocab);
    const nn::LMHeadSpec spec{.d_model = c, .vocab_size = v, .bias = bias};
    p.head = tied ? nn::make_tied_lm_head(spec, *p.emb, bctx, nn::ParallelStyle::vocab)
                  : nn::make_lm_head(spec, bctx, nn::ParallelStyle::vocab);
    p.all->register_module("emb", p.emb);
    p.all->register_module("head", p.head);
    return p;
  };
  const auto [serial, twin] = make_twins(ctx, 9, what, build);
  RANK_CHECK(twin.head->type_name() == "VocabParallelLMHead2D", what, ": got ",
             twin.head->type_name());
  if (bias) {  // a nonzero bias, so its gradient and its padding show
    const auto placements = twin.head->named_placements();
    set_param(serial.head->bias(), twin.head->bias(), placements.back().second, smooth({v}, 91));
  }
  Generator data(4);
  const Tensor ids = randint(0, v, {b, t}, {.dtype = DType::i64}, &data);
  Tensor targets = randint(0, v, {b, t}, {.dtype = DType::i64}, &data);
  targets.narrow(1, 0, 1).fill_(-100);
  const Tensor x = smooth({b, t, c}, 92);
  const CrossEntropyOptions opts{.label_smoothing = smoothing};
  Tensor xs = leaf(x), xt = leaf(x);
  Tensor ls = serial.head->loss(add(xs, serial.emb->forward(ids)), targets, opts);
  reset(g);
  Tensor lt = twin.head->loss(add(split_2d(xt, g), twin.emb->forward(ids)), targets, opts);
  check_close(lt, ls, what + " loss");
  autograd::backward({ls});
  autograd::backward({lt});
  const CommStats sums = depth_sums(g, tied, bias, v, c);
  check_groups({{g.dep, &sums}}, what + " depth sums");
  check_close(xt.grad(), xs.grad(), what + " input gradient");
  check_params(*twin.all, *serial.all, ctx, what);
  autograd::NoGradGuard no_grad;
  check_close(twin.head->forward(split_2d(x, g)), serial.head->forward(x), what + " logits");
  // The per-target losses, whole on every rank.
  const CrossEntropyOptions none{.label_smoothing = smoothing, .reduction = "none"};
  check_close(twin.head->loss(split_2d(x, g), targets, none), serial.head->loss(x, targets, none),
              what + " losses (reduction none)");
}

// The classification head (pooling, LayerNorm2D, dropout, Classifier2D to 5 classes that do not
// split) from make_classification_head: the whole batch's logits on every rank, their loss,
// every gradient.
void check_classification_head(const ParallelContext& ctx, nn::Pooling pooling, double dropout) {
  const SummaGrid g = grid_of(ctx);
  const int q = g.q();
  const std::string what =
      str_cat("ClassificationHead pooling ", int(pooling), " dropout ", dropout, on_grid(g));
  const nn::ClassificationHeadSpec spec{.d_model = 2 * q * q,
                                        .num_classes = 5,
                                        .pooling = pooling,
                                        .norm = true,
                                        .dropout = dropout,
                                        .init_std = 0.3};
  const auto [serial, twin] = make_twins(ctx, 10, what, [&](const nn::BuildContext& b) {
    return nn::make_classification_head(spec, b);
  });
  RANK_CHECK(
      twin->head()->type_name() == "Classifier2D" && twin->norm()->type_name() == "LayerNorm2D",
      what, ": got ", twin->head()->type_name(), " and ", twin->norm()->type_name());
  const int64_t b = 2 * g.batch_parts();
  const Tensor x = pooling == nn::Pooling::none ? smooth({b, spec.d_model}, 101, 2.0, 1.0)
                                                : smooth({b, 3, spec.d_model}, 101, 2.0, 1.0);
  Generator data(5);
  const Tensor labels = randint(0, 5, {b}, {.dtype = DType::i64}, &data);
  check_pass(
      x, [&](const Tensor& xs) { return serial->forward(xs); },
      [&](const Tensor& xt) { return twin->forward(split_2d(xt, g)); },
      [&](const Tensor& y) { return cross_entropy(y, labels); }, what,
      {.output = " logits", .seed = 6});
  check_params(*twin, *serial, ctx, what, /*replicated_ok=*/true);  // the bias is replicated
}

// ViT's patch embedding: the whole batch of images in, this rank's block of the patches out.
void check_patch_embedding(const ParallelContext& ctx) {
  const SummaGrid g = grid_of(ctx);
  const int q = g.q();
  const std::string what = "PatchEmbedding2D" + on_grid(g);
  const nn::PatchEmbeddingSpec spec{.image_height = 8,
                                    .image_width = 12,
                                    .patch_size = 4,
                                    .in_channels = 3,
                                    .embed_dim = 2 * q * q,
                                    .init_std = 0.1};
  const auto [serial, twin] = make_twins(
      ctx, 11, what, [&](const nn::BuildContext& b) { return nn::make_patch_embedding(spec, b); });
  RANK_CHECK(twin->type_name() == "PatchEmbedding2D", what, ": got ", twin->type_name());
  const int64_t b = 2 * g.batch_parts();
  check_pass(
      smooth({b, 3, 8, 12}, 111), [&](const Tensor& xs) { return serial->forward(xs); },
      [&](const Tensor& xt) { return gather_2d(twin->forward(xt), g); },
      weighted_by(smooth({b, 6, spec.embed_dim}, 112)), what);  // (B, 6, D)
  check_params(*twin, *serial, ctx, what);
}

// Whole blocks from make_block: GPT's (pre-LN, causal) and BERT's (post-LN, key-padding mask), with
// dropout everywhere and activation checkpointing once.
void check_block(const ParallelContext& ctx, bool pre_ln, bool checkpoint) {
  const SummaGrid g = grid_of(ctx);
  const int q = g.q();
  const std::string what = str_cat("Block", pre_ln ? " pre-LN causal" : " post-LN masked",
                                   checkpoint ? " checkpointed" : "", on_grid(g));
  const nn::BlockSpec spec{.d_model = 2 * q * q,
                           .n_heads = q,
                           .causal = pre_ln,
                           .pre_ln = pre_ln,
                           .gelu = pre_ln ? "tanh" : "none",
                           .dropout = 0.1,
                           .attn_dropout = 0.1,
                           .init_std = 0.2,
                           .residual_layers = 2,
                           .checkpoint = checkpoint};
  const auto [serial, twin] =
      make_twins(ctx, 12, what, [&](const nn::BuildContext& b) { return nn::make_block(spec, b); });
  RANK_CHECK(twin->ln_1()->type_name() == "LayerNorm2D" &&
                 twin->attn()->type_name() == "MultiHeadAttention2D",
             what, ": got ", twin->ln_1()->type_name(), ", ", twin->attn()->type_name());
  const int64_t b = 2 * g.batch_parts(), t = 5;
  Tensor mask;
  if (!pre_ln) {
    mask = ones({b, t}, {.dtype = DType::b8});
    mask.narrow(0, 0, 1).narrow(1, 3, 2).fill_(0);
  }
  const Tensor x = smooth({b, t, spec.d_model}, 121);
  check_pass(
      x, [&](const Tensor& xs) { return serial->forward(xs, mask); },
      [&](const Tensor& xt) { return gather_2d(twin->forward(split_2d(xt, g), mask), g); },
      weighted_by(smooth(x.shape(), 122)), what, {.seed = 13});
  check_params(*twin, *serial, ctx, what);
}

// The 2D cross-entropy alone on a block of logits, against cross_entropy on the whole: every
// reduction, ignored targets, one target batch chunk entirely ignored.
void check_cross_entropy(const ParallelContext& ctx) {
  const SummaGrid g = grid_of(ctx);
  const int q = g.q(), s = g.grid_col();
  const int64_t v = 11, b = 2 * g.batch_parts(), t = 3;
  const auto shard = parallel::tensor::vocab_shard(v, s, q, q);
  const Tensor logits = smooth({b, t, v}, 131, 3.0);
  Generator data(6);
  Tensor targets = randint(0, v, {b, t}, {.dtype = DType::i64}, &data);
  targets.narrow(0, 0, 2).fill_(-100);  // batch chunk 0 has no target that counts
  Tensor padded = zeros({b, t, shard.padded_vocab_size});
  padded.narrow(2, 0, v).copy_(logits);
  for (const std::string reduction : {"mean", "sum", "none"}) {
    const std::string what = "vocab_parallel_cross_entropy_2d " + reduction + on_grid(g);
    const CrossEntropyOptions opts{.reduction = reduction};
    Tensor ls = leaf(logits);
    Tensor lt = leaf(block(padded, g));  // (B / q, T, shard.local)
    Tensor want = cross_entropy(ls, targets, opts);
    Tensor got = parallel::tensor::vocab_parallel_cross_entropy_2d(lt, targets, shard, opts, g);
    check_close(got, want, what + " loss");
    const Tensor w = reduction == "none" ? smooth(want.shape(), 132) : ones({});
    autograd::backward({sum(mul(want, w))});
    autograd::backward({sum(mul(got, w))});
    Tensor gfull = zeros({b, t, shard.padded_vocab_size});
    gfull.narrow(2, 0, v).copy_(ls.grad());
    check_close(lt.grad(), block(gfull, g), what + " logits gradient");
  }
}

}  // namespace

int main(int argc, char** argv) {
  return parallel::run_distributed(
      argc, argv, [](const std::shared_ptr<parallel::Communicator>& world) {
        const parallel::ParallelConfig config = summa_config(world->size());
        ParallelContext ctx(config, world);
        check_dropout(ctx);
        check_cross_entropy(ctx);
        check_attention(ctx, /*causal=*/true, /*masked=*/false, 0.0);
        check_attention(ctx, /*causal=*/false, /*masked=*/true, 0.2);
        check_attention(ctx, /*causal=*/true, /*masked=*/false, 0.2);
        check_embeddings(ctx);
        check_lm_head(ctx, /*tied=*/true, /*bias=*/true, 0.0);
        check_lm_head(ctx, /*tied=*/false, /*bias=*/false, 0.1);
        check_classification_head(ctx, nn::Pooling::cls, 0.2);
        check_classification_head(ctx, nn::Pooling::mean, 0.0);
        check_classification_head(ctx, nn::Pooling::none, 0.2);
        check_patch_embedding(ctx);
        check_block(ctx, /*pre_ln=*/true, /*checkpoint=*/false);
        check_block(ctx, /*pre_ln=*/false, /*checkpoint=*/false);
        check_block(ctx, /*pre_ln=*/true, /*checkpoint=*/true);
        world->barrier()->wait();
        if (world->rank() == 0)
          std::printf("tp %s layers: all checks passed%s ranks (%lld checks on rank 0)\n",
                      parallel::tensor_mode_name(config.tensor.mode), on_grid(grid_of(ctx)).c_str(),
                      static_cast<long long>(checks_passed()));
        return 0;
      });
}

// The model layers of tp_3d_ranks (see its header comment): the embeddings, attention with
// dropout and whole GPTs built by the factories under mode 3d, against the serial model from the
// same seed.
#include "tests/models/nn/parallel/tp_3d_models.h"

#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/factory.h"
#include "models/gpt/gpt.h"
#include "models/nn/factory.h"
#include "models/nn/nn.h"
#include "models/nn/parallel/layer_norm_3d.h"
#include "models/nn/parallel/linear_3d.h"
#include "parallel/comm/mpi_runtime.h"
#include "parallel/mesh/parallel_context.h"
#include "parallel/tensor/cube_3d.h"
#include "parallel/tensor/matmul_3d.h"
#include "parallel/tensor/placement_3d.h"
#include "parallel/tensor/placement_ops.h"
#include "tests/models/nn/parallel/twin_checks.h"
#include "tests/models/nn/parallel/twin_fixture.h"
#include "tests/models/nn/parallel/twin_models.h"
#include "tests/parallel/rank_check.h"

namespace tessera::testing3d {

using parallel::CommKind;
using parallel::ParallelContext;
using parallel::tensor::Cube3D;
using parallel::tensor::CubeCoords;
using parallel::tensor::gather_3d;
using parallel::tensor::split_3d;

using namespace parallel::testing;  // the twin fixture (twin_*.h) and RANK_CHECK's counter

// ---------------------------------------------------------------- model layers

// What the 3D embeddings move (vocab_3d.h), f32, each way: the token table's partial rows
// (B, T, C / q^2) all-to-all over the weight group and as many bytes reduce-scattered (backward:
// all-gathered) over the input group; the position table gathers (backward: reduce-scatters) over
// the weight group the whole table's columns for batched ids and only the looked-up rows for
// positions (T), not the table's L. `ids`: the whole batch's B T; `positions`: each lookup's T.
CubeVolume embedding_volume_3d(bool vocab, bool backward, int q, int64_t ids,
                               const nn::EmbeddingSpec& spec,
                               const std::vector<int64_t>& positions) {
  const int64_t cols = spec.dim / (q * q) * 4;  // bytes of one row's (C / q^2)
  CubeVolume v;
  if (vocab) {
    ring(v.weight, CommKind::all_to_all, q, ids * cols);
    ring(v.input, backward ? CommKind::all_gather : CommKind::reduce_scatter, q, ids * cols);
    return v;
  }
  const CommKind kind = backward ? CommKind::reduce_scatter : CommKind::all_gather;
  ring(v.weight, kind, q, spec.num_embeddings * cols);
  for (int64_t rows : positions) ring(v.weight, kind, q, rows * cols);
  return v;
}

// The token table (vocab-parallel) and a position table from make_embedding under mode 3d against
// the serial tables from the same generator: ids (B, T) give this rank's piece; positions (T) give
// (T, C / q^2), features chunk k q + j, for every row of the table and for its first 5 (whose
// other rows get no gradient); the bytes each group moves, forward and backward.
void check_embeddings(const ParallelContext& ctx) {
  const Cube3D cube = cube_of(ctx);
  const CubeCoords at = cube.coords();
  const int q = cube.q();
  for (const bool vocab : {true, false}) {
    const std::string what = str_cat(vocab ? "token" : "position", " embedding", on_cube(q));
    const nn::EmbeddingSpec spec{
        .num_embeddings = 3 * q * q, .dim = 2 * q * q * q, .init_std = 0.5};
    const nn::ParallelStyle style = vocab ? nn::ParallelStyle::vocab : nn::ParallelStyle::none;
    const auto [serial, twin] = make_twins(ctx, 9, what, [&](const nn::BuildContext& b) {
      return nn::make_embedding(spec, b, style);
    });
    RANK_CHECK(twin->type_name() == (vocab ? "VocabParallelEmbedding3D" : "Embedding3D"), what,
               ": built ", twin->type_name());
    Generator data(13);
    const int64_t b = 2 * q, t = 5, cols = spec.dim / (q * q);
    const Tensor ids = randint(0, spec.num_embeddings, {b, t}, {.dtype = DType::i64}, &data);
    const Tensor gy = smooth({b, t, spec.dim}, 41);
    // Positions (T) only for the position table (the token table takes a batch (B, ...)).
    const std::vector<int64_t> lengths =
        vocab ? std::vector<int64_t>{} : std::vector<int64_t>{spec.num_embeddings, t};
    std::vector<Tensor> pos, gp, ps;
    const Tensor ys = serial->forward(ids);
    Tensor serial_loss = sum(mul(ys, gy));
    for (const int64_t rows : lengths) {
      pos.push_back(arange(0, double(rows), 1.0, {.dtype = DType::i64}));
      gp.push_back(smooth({rows, spec.dim}, 42 + uint64_t(rows)));
      ps.push_back(serial->forward(pos.back()));
      serial_loss = add(serial_loss, sum(mul(ps.back(), gp.back())));
    }
    autograd::backward({serial_loss});

    reset(cube);
    const Tensor piece = twin->forward(ids);
    std::vector<Tensor> pt;  // (T, C / q^2): every position, its features
    for (const Tensor& p : pos) pt.push_back(twin->forward(p));
    check_volume(cube, embedding_volume_3d(vocab, false, q, b * t, spec, lengths),
                 what + " forward");
    const Tensor yt = gather_3d(piece, cube);
    check_close(yt, ys, what + " of ids");
    Tensor twin_loss = sum(mul(yt, gy));
    for (size_t n = 0; n < pos.size(); ++n) {
      check_close(pt[n], ps[n].narrow(1, at.feature_chunk() * cols, cols),
                  str_cat(what, " of ", lengths[n], " positions"));
      // The positions' gradient: each feature chunk's share once (on batch chunk i = 0 only, as
      // the weight group sums it over the batch chunks).
      const Tensor gp_mine = gp[n].narrow(1, at.feature_chunk() * cols, cols);
      twin_loss = add(twin_loss, sum(mul(pt[n], at.i == 0 ? gp_mine : mul(gp_mine, 0.0))));
    }
    reset(cube);
    autograd::backward({twin_loss});
    check_volume(cube, embedding_volume_3d(vocab, true, q, b * t, spec, lengths),
                 what + " backward");
    check_close(select(gather_3d(unsqueeze(twin->row(2), 0), cube), 0, 0), serial->row(2).detach(),
                what + " row 2");
    check_params(*twin, *serial, ctx, what);
  }
}

// make_attention under mode 3d (fused q | k | v through linear_3d, H / q^2 heads per rank) against
// the serial layer, causal, with attention and residual dropout drawn at global positions.
void check_attention(const ParallelContext& ctx) {
  const Cube3D cube = cube_of(ctx);
  const int q = cube.q();
  const std::string what = str_cat("MultiHeadAttention3D dropout 0.2", on_cube(q));
  const nn::AttentionSpec spec{.d_model = 2 * q * q * q,
                               .n_heads = q * q,
                               .bias = true,
                               .causal = true,
                               .attn_dropout = 0.2,
                               .resid_dropout = 0.2};
  const auto [serial, twin] = make_twins(
      ctx, 17, what, [&](const nn::BuildContext& b) { return nn::make_attention(spec, b); });
  RANK_CHECK(twin->type_name() == "MultiHeadAttention3D", what, ": built ", twin->type_name());
  const Tensor x = smooth({2 * q, 6, spec.d_model}, 43);
  check_pass(
      x, [&](const Tensor& xs) { return serial->forward(xs); },
      [&](const Tensor& xt) { return gather_3d(twin->forward(split_3d(xt, cube)), cube); },
      weighted_by(smooth(x.shape(), 44)), what);
  check_params(*twin, *serial, ctx, what);
}

// A whole GPT under mode 3d against the serial GPT from one seed: the loss (vocab-parallel, some
// targets ignored) and every gradient; in eval mode the logits, a one-prompt batch (padded to
// split over the cube side) and greedy generation.
void check_gpt(const ParallelContext& ctx, bool tied, double dropout) {
  const int q = cube_of(ctx).q();
  const std::string what =
      str_cat("GPT", tied ? " tied" : " untied", " dropout ", dropout, on_cube(q));
  const gpt::GPTConfig c{.vocab_size = 5 * q * q,
                         .context_length = 8,
                         .n_layers = 2,
                         .n_heads = q * q,
                         .d_model = 2 * q * q * q,
                         .dropout = dropout,
                         .attn_dropout = dropout,
                         .tie_embeddings = tied};
  const auto [serial, twin] = make_twins_of<gpt::GPT>(ctx, 7, what, c);
  check_gpt_layers(*twin, "3D", what);
  const auto x = gpt_batch(c.vocab_size, 2 * q, 8);
  check_train_step(
      *serial, *twin, [&](gpt::GPT& m) { return m.loss(x.ids, x.targets); }, what);
  check_params(*twin, *serial, ctx, what);
  check_gpt_eval(*serial, *twin, x.ids, 5, 3, what);
  // In training the batch must split over the cube side: every rank refuses before a collective.
  autograd::NoGradGuard no_grad;
  twin->train();
  const std::string e = error_of([&] {
    twin->loss(x.ids.narrow(0, 0, q + 1).contiguous(), x.targets.narrow(0, 0, q + 1).contiguous());
  });
  RANK_CHECK(e.find(str_cat("divisible by the 3D cube side q = ", q)) != std::string::npos, what,
             ": odd batch error '", e, "'");
}

}  // namespace tessera::testing3d

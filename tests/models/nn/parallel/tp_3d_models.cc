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

using parallel::ParallelContext;
using parallel::tensor::Cube3D;
using parallel::tensor::CubeCoords;
using parallel::tensor::gather_3d;
using parallel::tensor::split_3d;

using namespace parallel::testing;  // the twin fixture (twin_*.h) and RANK_CHECK's counter

// ---------------------------------------------------------------- model layers

// The token table (vocab-parallel) and a position table from make_embedding under mode 3d against
// the serial tables from the same generator: ids (B, T) give this rank's piece; positions (T) give
// (T, C / q^2), features chunk k q + j.
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
    const Tensor ids = randint(0, spec.num_embeddings, {2 * q, 5}, {.dtype = DType::i64}, &data);
    const Tensor gy = smooth({2 * q, 5, spec.dim}, 41);
    const Tensor pos = arange(0, double(spec.num_embeddings), 1.0, {.dtype = DType::i64});
    const Tensor gp = smooth({spec.num_embeddings, spec.dim}, 42);
    // Positions (T) only for the position table (the token table takes a batch (B, ...)).
    const Tensor ys = serial->forward(ids), ps = vocab ? Tensor() : serial->forward(pos);
    autograd::backward({vocab ? sum(mul(ys, gy)) : add(sum(mul(ys, gy)), sum(mul(ps, gp)))});
    const Tensor yt = gather_3d(twin->forward(ids), cube);
    check_close(yt, ys, what + " of ids");
    if (vocab) {
      autograd::backward({sum(mul(yt, gy))});
    } else {
      const Tensor pt = twin->forward(pos);  // (V, C / q^2): every position, its features
      const int64_t cols = spec.dim / (q * q);
      check_close(pt, ps.narrow(1, at.feature_chunk() * cols, cols), what + " of positions");
      // The positions' gradient: each feature chunk's share once (on batch chunk i = 0 only, as
      // the weight group sums it over the batch chunks).
      const Tensor gp_mine = gp.narrow(1, at.feature_chunk() * cols, cols);
      const Tensor share = at.i == 0 ? gp_mine : mul(gp_mine, 0.0);
      autograd::backward({add(sum(mul(yt, gy)), sum(mul(pt, share)))});
    }
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

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
#include "tests/parallel/rank_check.h"

namespace tessera::testing3d {

using parallel::ParallelContext;
using parallel::tensor::Cube3D;
using parallel::tensor::CubeCoords;
using parallel::tensor::gather_3d;
using parallel::tensor::split_3d;

using parallel::testing::check_close;
using parallel::testing::check_params;
using parallel::testing::leaf;
using parallel::testing::rel_error;
using parallel::testing::smooth;

namespace {

std::string on_cube(int q) { return str_cat(" on ", q, " x ", q, " x ", q); }

}  // namespace

// ---------------------------------------------------------------- model layers

// The token table (vocab-parallel) and a position table from make_embedding under mode 3d against
// the serial tables from the same generator: ids (B, T) give this rank's piece; positions (T) give
// (T, C / q^2), features chunk k q + j.
void check_embeddings(const ParallelContext& ctx) {
  Generator unused(0);
  const Cube3D cube = nn::cube_of(nn::BuildContext(unused, &ctx), "test");
  const CubeCoords at = cube.coords();
  const int q = cube.q();
  for (const bool vocab : {true, false}) {
    const std::string what = str_cat(vocab ? "token" : "position", " embedding", on_cube(q));
    const nn::EmbeddingSpec spec{
        .num_embeddings = 3 * q * q, .dim = 2 * q * q * q, .init_std = 0.5};
    const nn::ParallelStyle style = vocab ? nn::ParallelStyle::vocab : nn::ParallelStyle::none;
    Generator g1(9), g2(9);
    auto serial = nn::make_embedding(spec, g1, style);
    auto twin = nn::make_embedding(spec, nn::BuildContext(g2, &ctx), style);
    RANK_CHECK(twin->type_name() == (vocab ? "VocabParallelEmbedding3D" : "Embedding3D"), what,
               ": built ", twin->type_name());
    RANK_CHECK(g1.offset() == g2.offset(), what, ": the twin drew ", g2.offset(),
               " counters, the serial ", g1.offset());
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
  Generator unused(0);
  const Cube3D cube = nn::cube_of(nn::BuildContext(unused, &ctx), "test");
  const int q = cube.q();
  const std::string what = str_cat("MultiHeadAttention3D dropout 0.2", on_cube(q));
  const nn::AttentionSpec spec{.d_model = 2 * q * q * q,
                               .n_heads = q * q,
                               .bias = true,
                               .causal = true,
                               .attn_dropout = 0.2,
                               .resid_dropout = 0.2};
  Generator g1(17), g2(17);
  auto serial = nn::make_attention(spec, g1);
  auto twin = nn::make_attention(spec, nn::BuildContext(g2, &ctx));
  RANK_CHECK(twin->type_name() == "MultiHeadAttention3D", what, ": built ", twin->type_name());
  const Tensor x = smooth({2 * q, 6, spec.d_model}, 43);
  const Tensor gy = smooth(x.shape(), 44);
  Tensor xs = leaf(x), xt = leaf(x);
  manual_seed(5);
  Tensor ys = serial->forward(xs);
  autograd::backward({sum(mul(ys, gy))});
  manual_seed(5);
  Tensor yt = gather_3d(twin->forward(split_3d(xt, cube)), cube);
  check_close(yt, ys, what + " output");
  autograd::backward({sum(mul(yt, gy))});
  check_close(xt.grad(), xs.grad(), what + " input gradient");
  check_params(*twin, *serial, ctx, what);
}

// A whole GPT under mode 3d against the serial GPT from one seed: the loss (vocab-parallel, some
// targets ignored) and every gradient; in eval mode the logits, a one-prompt batch (padded to
// split over the cube side) and greedy generation.
void check_gpt(const ParallelContext& ctx, bool tied, double dropout) {
  Generator unused(0);
  const int q = nn::cube_of(nn::BuildContext(unused, &ctx), "test").q();
  const std::string what =
      str_cat("GPT", tied ? " tied" : " untied", " dropout ", dropout, on_cube(q));
  gpt::GPTConfig c;
  c.vocab_size = 5 * q * q;
  c.context_length = 8;
  c.n_layers = 2;
  c.n_heads = q * q;
  c.d_model = 2 * q * q * q;
  c.dropout = dropout;
  c.attn_dropout = dropout;
  c.tie_embeddings = tied;
  Generator g_serial(7), g_twin(7);
  gpt::GPT serial(c, g_serial);
  gpt::GPT twin(c, nn::BuildContext(g_twin, &ctx));
  RANK_CHECK(g_serial.offset() == g_twin.offset(), what, ": the twin drew ", g_twin.offset(),
             " counters, the serial ", g_serial.offset());
  RANK_CHECK(twin.wte()->type_name() == "VocabParallelEmbedding3D" &&
                 twin.wpe()->type_name() == "Embedding3D" &&
                 twin.ln_f()->type_name() == "LayerNorm3D" &&
                 twin.lm_head()->type_name() == "VocabParallelLMHead3D",
             what, ": layers ", twin.wte()->type_name(), ", ", twin.wpe()->type_name(), ", ",
             twin.ln_f()->type_name(), ", ", twin.lm_head()->type_name());
  Generator data(11);
  const int64_t b = 2 * q, t = 8;
  Tensor ids = randint(0, c.vocab_size, {b, t}, {.dtype = DType::i64}, &data);
  Tensor targets = randint(0, c.vocab_size, {b, t}, {.dtype = DType::i64}, &data);
  targets.narrow(1, 0, 2).fill_(-100);  // some ignored positions
  manual_seed(5);
  Tensor want = serial.loss(ids, targets);
  autograd::backward({want});
  manual_seed(5);
  Tensor got = twin.loss(ids, targets);
  autograd::backward({got});
  check_close(got, want, what + " loss");
  check_params(twin, serial, ctx, what);
  autograd::NoGradGuard no_grad;
  serial.eval();
  twin.eval();
  check_close(twin.forward(ids), serial.forward(ids), what + " logits");
  Tensor prompt = ids.narrow(0, 0, 1).narrow(1, 0, 5).contiguous();
  check_close(twin.forward(prompt), serial.forward(prompt), what + " logits of one prompt");
  Generator gs(3), gt(3);
  const Tensor gen_s = serial.generate(prompt, 3, /*temperature=*/0.0, /*top_k=*/0, gs);
  const Tensor gen_t = twin.generate(prompt, 3, /*temperature=*/0.0, /*top_k=*/0, gt);
  RANK_CHECK(rel_error(gen_t.to(DType::f32), gen_s.to(DType::f32)) == 0.0, what,
             ": generated tokens differ");
  // In training the batch must split over the cube side: every rank refuses before a collective.
  twin.train();
  const std::string e = parallel::testing::value_error_of([&] {
    twin.loss(ids.narrow(0, 0, q + 1).contiguous(), targets.narrow(0, 0, q + 1).contiguous());
  });
  RANK_CHECK(e.find(str_cat("divisible by the 3D cube side q = ", q)) != std::string::npos, what,
             ": odd batch error '", e, "'");
}

}  // namespace tessera::testing3d

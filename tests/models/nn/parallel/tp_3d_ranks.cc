// Multi-rank program run by tp_3d_test.sh: 3D tensor parallelism on a q x q x q cube (P = q^3
// ranks) against the serial math from the same seed. The cube's coordinates against the mesh's;
// the activation layout (split_3d / gather_3d); linear_3d against the serial matmul (forward, dX
// and dW, fused blocks, ranks whose output feeds no loss, an input that needs no gradient);
// Linear3D, LayerNorm3D and a LayerNorm3D -> Linear3D -> GELU -> Linear3D chain against the serial
// layers (outputs, input gradients and every parameter gathered by placement, within 1e-5
// relative; parameter values equal to the serial draw); the bytes each rank moves per group and
// collective kind equal the prediction written out below; errors. Then the model layers built by
// the factories under mode 3d: the embeddings (token table vocab-parallel, positions), attention
// with dropout on, and whole GPTs (tied and untied LM heads with the 3D vocab-parallel loss, MLPs,
// LayerNorms): loss, outputs and every gradient gathered within 1e-5 relative, every parameter
// equal to the serial draw bit for bit. A failure aborts the job.
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
#include "tests/models/nn/parallel/tp_3d_models.h"
#include "tests/models/nn/parallel/twin_checks.h"
#include "tests/models/nn/parallel/twin_fixture.h"
#include "tests/parallel/rank_check.h"

using namespace tessera;
using parallel::CommKind;
using parallel::CommStats;
using parallel::ParallelContext;
using parallel::tensor::Cube3D;
using parallel::tensor::CubeCoords;
using parallel::tensor::gather_3d;
using parallel::tensor::split_3d;

using namespace parallel::testing;  // the twin fixture (twin_*.h) and RANK_CHECK's counter

namespace {

constexpr int64_t kF32 = 4;

// ---------------------------------------------------------------- the predicted volume
//
// Per rank and call, the counters of comm_types.h: all_gather and reduce_scatter count 1 call, a
// payload of the whole (gathered / input) tensor, and (q - 1) / q of it sent and received;
// all_reduce the tensor, 2 (q - 1) / q of it sent and received.
using Volume = CubeVolume;

// linear_3d (matmul_3d.h) on n rows per rank, in -> out features, f32: forward input all-gather
// to (n, in / q), weight all-gather to (out / q, in / q), output reduce-scatter of (n, out / q);
// backward output all-gather of (n, out / q), input reduce-scatter of (n, in / q) when the input
// requires grad, weight reduce-scatter of (out / q, in / q). A bias adds a weight all-gather
// (forward) and reduce-scatter (backward) of out / q^2.
void predict_linear(Volume& fwd, Volume& bwd, int q, int64_t n, int64_t in, int64_t out,
                    bool input_grad, bool bias) {
  const int64_t x = n * in / q * kF32, w = out / q * in / q * kF32, y = n * out / q * kF32;
  ring(fwd.input, CommKind::all_gather, q, x);
  ring(fwd.weight, CommKind::all_gather, q, w);
  ring(fwd.output, CommKind::reduce_scatter, q, y);
  ring(bwd.output, CommKind::all_gather, q, y);
  if (input_grad) ring(bwd.input, CommKind::reduce_scatter, q, x);
  ring(bwd.weight, CommKind::reduce_scatter, q, w);
  if (bias) {
    ring(fwd.weight, CommKind::all_gather, q, out / (q * q) * kF32);
    ring(bwd.weight, CommKind::reduce_scatter, q, out / (q * q) * kF32);
  }
}

// LayerNorm3D (C, weight and bias) on n rows per rank: the mean and the variance each one
// all-reduce of n over the input and over the output group, forward and backward; the weight and
// the bias each one all-gather (forward) and reduce-scatter (backward) of C / q^2.
void predict_layer_norm(Volume& fwd, Volume& bwd, int q, int64_t n, int64_t c) {
  for (int twice = 0; twice < 2; ++twice) {
    for (Volume* v : {&fwd, &bwd}) {
      ring(v->input, CommKind::all_reduce, q, n * kF32);
      ring(v->output, CommKind::all_reduce, q, n * kF32);
    }
    ring(fwd.weight, CommKind::all_gather, q, c / (q * q) * kF32);
    ring(bwd.weight, CommKind::reduce_scatter, q, c / (q * q) * kF32);
  }
}

// ---------------------------------------------------------------- the cube and its layout

void check_cube(const ParallelContext& ctx, const Cube3D& cube) {
  const int q = cube.q();
  const CubeCoords at = cube.coords();
  RANK_CHECK(at.q == q && at.i == ctx.coord("tp_i") && at.j == ctx.coord("tp_j") &&
                 at.k == ctx.coord("tp_k"),
             "cube coordinates (", at.i, ", ", at.j, ", ", at.k, ") vs the mesh's");
  RANK_CHECK(ctx.tensor_group()->rank() == at.k * q * q + at.j * q + at.i, "tensor rank ",
             ctx.tensor_group()->rank(), " vs k q^2 + j q + i");
  // split_3d cuts the piece by hand; gather_3d gives back the whole; the gradient of the whole
  // through both is the serial one (gather's backward takes the piece of it, split's joins them).
  const Tensor x = smooth({3 * q, 5, 2 * q * q}, 11), gy = smooth(x.shape(), 12);
  Tensor xt = leaf(x);
  const Tensor p = split_3d(xt, cube);
  RANK_CHECK(rel_error(p, piece(x, at)) == 0.0, "split_3d piece differs from the hand cut");
  const Tensor whole = gather_3d(p, cube);
  RANK_CHECK(rel_error(whole, x) == 0.0, "gather_3d(split_3d(x)) differs from x");
  autograd::backward({sum(mul(whole, gy))});
  RANK_CHECK(rel_error(xt.grad(), gy) == 0.0, "split_3d / gather_3d gradient differs");
}

// ---------------------------------------------------------------- linear_3d

struct LinearCase {
  int64_t fused = 1;
  bool input_grad = true;
  bool fed = true;  // false: ranks with (i + j + k) odd feed no loss
};

// linear_3d of the hand-cut pieces (weight cut by its placement) against matmul(X, W^T): output
// piece, dX piece and dW gathered, each within 1e-5; the predicted bytes per group and kind.
// Odd sizes: batch chunk 3, sequence 5, 3 input and 5 output features per rank and block.
void check_linear_3d(const ParallelContext& ctx, const Cube3D& cube, const LinearCase& c,
                     uint64_t seed) {
  const int q = cube.q();
  const CubeCoords at = cube.coords();
  const bool fed = c.fed || (at.i + at.j + at.k) % 2 == 0;
  const std::string what =
      str_cat("linear_3d fused ", c.fused, c.input_grad ? "" : " (no input grad)",
              c.fed ? "" : " (some ranks not fed)", on_cube(q));
  const int64_t b = 3 * q, t = 5, in = 3 * q * q, out = 5 * c.fused * q * q;
  const Tensor x = smooth({b, t, in}, seed), w = smooth({out, in}, seed + 1);
  const Tensor gy_full = smooth({b, t, out}, seed + 2);
  const parallel::tensor::Placement wp =
      parallel::tensor::weight_placement_3d({out, in}, at, "test", c.fused);
  // The serial product; the loss only counts the pieces of the ranks that feed it.
  Tensor gy_fed = gy_full.clone();
  {
    // Which ranks feed the loss, as every rank sees it.
    const int mine = ctx.tensor_group()->rank();
    Tensor flags = zeros({q * q * q}, {.dtype = DType::i32});
    flags.data<int32_t>()[mine] = fed ? 1 : 0;
    ctx.tensor_group()->all_reduce(flags)->wait();
    for (int kk = 0; kk < q; ++kk)
      for (int jj = 0; jj < q; ++jj)
        for (int ii = 0; ii < q; ++ii) {
          if (flags.data<int32_t>()[kk * q * q + jj * q + ii]) continue;
          const CubeCoords other{.q = q, .i = ii, .j = jj, .k = kk};
          const int64_t rows = b / q, cols = out / (q * q);
          // Under fused blocks every block's chunk k q + j belongs to that rank.
          for (int64_t blk = 0; blk < c.fused; ++blk)
            gy_fed.narrow(0, ii * rows, rows)
                .narrow(2, blk * (out / c.fused) + other.feature_chunk() * (cols / c.fused),
                        cols / c.fused)
                .zero_();
        }
  }
  Tensor xs = leaf(x), ws = leaf(w);
  autograd::backward({sum(mul(matmul(xs, transpose(ws, 0, 1)), gy_fed))});
  // The cube.
  auto fused_piece = [&](const Tensor& full) {  // each block's chunk k q + j, blocks in order
    std::vector<Tensor> blocks;
    for (int64_t blk = 0; blk < c.fused; ++blk)
      blocks.push_back(piece(full.narrow(-1, blk * (out / c.fused), out / c.fused), at));
    return blocks.size() == 1 ? blocks[0] : cat(blocks, -1);
  };
  Tensor xt = piece(x, at);
  if (c.input_grad) xt = leaf(xt);
  Tensor wt = leaf(parallel::tensor::cut_shard(w, wp));
  RANK_CHECK(wt.shape() == Shape({out / q, in / (q * q)}), what, ": weight shard ",
             shape_str(wt.shape()));
  reset(cube);
  const Tensor yt = parallel::tensor::linear_3d(xt, wt, cube, c.fused);
  // Unfused, the output is the reduce-scatter's (fused, a reshape of it).
  if (c.fused == 1)
    RANK_CHECK(yt.grad_fn() && yt.grad_fn()->always_run(), what, ": expected an always-run node");
  check_close(yt, fused_piece(matmul(x, transpose(w, 0, 1))), what + " forward");
  Volume fwd, bwd;
  predict_linear(fwd, bwd, q, b / q * t, in, out, c.input_grad, /*bias=*/false);
  check_volume(cube, fwd, what + " forward");
  reset(cube);
  autograd::backward({fed ? sum(mul(yt, fused_piece(gy_full))) : sum(drop_grad(yt))});
  check_volume(cube, bwd, what + " backward");
  if (c.input_grad) check_close(xt.grad(), piece(xs.grad(), at), what + " dX");
  check_close(parallel::tensor::gather_full(wt.grad(), wp, ctx), ws.grad(), what + " dW");
}

// A cube of one rank (no groups) is the serial product, with its gradients.
void check_cube_of_one() {
  const Tensor x = smooth({3, 5, 7}, 81), w = smooth({4, 7}, 82), gy = smooth({3, 5, 4}, 83);
  Tensor xs = leaf(x), ws = leaf(w), xt = leaf(x), wt = leaf(w);
  autograd::backward({sum(mul(matmul(xs, transpose(ws, 0, 1)), gy))});
  const Tensor yt = parallel::tensor::linear_3d(xt, wt, Cube3D{});
  autograd::backward({sum(mul(yt, gy))});
  check_close(yt, matmul(x, transpose(w, 0, 1)), "linear_3d on a cube of one");
  check_close(xt.grad(), xs.grad(), "linear_3d on a cube of one dX");
  check_close(wt.grad(), ws.grad(), "linear_3d on a cube of one dW");
}

// ---------------------------------------------------------------- layers against serial

// Linear3D against the serial Linear from the same generator: weights drawn as the serial ones,
// the generator advanced as the serial one; output, input and parameter gradients through
// split_3d / gather_3d from the serial input.
void check_linear(const ParallelContext& ctx, nn::LinearInit init, bool bias, int64_t fused) {
  const Cube3D cube = cube_of(ctx);
  const int q = cube.q();
  const std::string what =
      str_cat("Linear3D init ", int(init), bias ? " bias" : "", " fused ", fused, on_cube(q));
  const nn::LinearSpec spec{.in_features = 3 * q * q,
                            .out_features = 2 * fused * q * q * q,
                            .bias = bias,
                            .init = init,
                            .fused_blocks = fused};
  Generator g1(7), g2(7);
  nn::Linear serial(spec, g1);
  nn::Linear3D twin(spec, nn::BuildContext(g2, &ctx), nn::ParallelStyle::column);
  RANK_CHECK(twin.parallel_style() == nn::ParallelStyle::column, what, ": style not kept");
  RANK_CHECK(g1.offset() == g2.offset(), what, ": the twin drew ", g2.offset(),
             " counters, the serial ", g1.offset());
  if (bias && init == nn::LinearInit::normal) {  // a nonzero bias, so its layout shows
    set_param(serial.bias(), twin.bias(), twin.named_placements().back().second,
              smooth({spec.out_features}, 23));
  }
  // Fused, each block's chunk k q + j, blocks in order: gathered block by block.
  auto twin_pass = [&](const Tensor& xt) {
    const Tensor local = twin.forward(split_3d(xt, cube));
    if (fused == 1) return gather_3d(local, cube);
    const int64_t per = local.size(-1) / fused;
    std::vector<Tensor> blocks;
    for (int64_t blk = 0; blk < fused; ++blk)
      blocks.push_back(gather_3d(narrow(local, -1, blk * per, per), cube));
    return cat(blocks, -1);
  };
  check_pass(
      smooth({3 * q, 5, spec.in_features}, 21),
      [&](const Tensor& xs) { return serial.forward(xs); }, twin_pass,
      weighted_by(smooth({3 * q, 5, spec.out_features}, 22)), what);
  check_params(twin, serial, ctx, what);
}

// LayerNorm3D with random affine parameters (cut by placement), on an input with a mean offset.
void check_layer_norm(const ParallelContext& ctx, bool affine, bool bias) {
  Generator unused(0);
  const nn::BuildContext bctx(unused, &ctx);
  const Cube3D cube = cube_of(ctx);
  const int q = cube.q();
  const std::string what =
      str_cat("LayerNorm3D", affine ? " affine" : "", bias ? " bias" : "", on_cube(q));
  const nn::LayerNormSpec spec{.dim = 3 * q * q * q, .affine = affine, .bias = bias};
  auto serial = nn::make_layer_norm(spec);
  nn::LayerNorm3D twin(spec, bctx);
  const auto placements = twin.named_placements();
  if (twin.weight().defined())
    set_param(serial->weight(), twin.weight(), placements[0].second, smooth({spec.dim}, 31));
  if (twin.bias().defined())
    set_param(serial->bias(), twin.bias(), placements[1].second, smooth({spec.dim}, 32));
  const Tensor x = smooth({3 * q, 5, spec.dim}, 33, 2.0, 3.0);
  check_pass(
      x, [&](const Tensor& xs) { return serial->forward(xs); },
      [&](const Tensor& xt) { return gather_3d(twin.forward(split_3d(xt, cube)), cube); },
      weighted_by(smooth(x.shape(), 34)), what);
  if (affine) {
    check_params(twin, *serial, ctx, what);
  } else {
    RANK_CHECK(twin.num_parameters() == 0, what, ": has parameters");
  }
}

// LayerNorm -> Linear -> GELU -> Linear, the 3D twins chained on this rank's pieces with no
// re-layout between them, against the serial layers; and the bytes it moves against the sums of
// the predictions above (the tensor group itself moves nothing).
struct Chain {
  std::shared_ptr<nn::LayerNorm> ln;
  std::shared_ptr<nn::Linear> fc, proj;
  Tensor forward(const Tensor& x) const {
    return proj->forward(gelu(fc->forward(ln->forward(x)), "tanh"));
  }
};

void check_chain(const ParallelContext& ctx) {
  const Cube3D cube = cube_of(ctx);
  const int q = cube.q();
  const CubeCoords at = cube.coords();
  const std::string what = "LayerNorm3D -> Linear3D -> GELU -> Linear3D" + on_cube(q);
  const int64_t c = 2 * q * q * q, h = 4 * c, b = 3 * q, t = 5;
  const nn::LinearSpec fc{.in_features = c, .out_features = h, .init_std = 0.3};
  const nn::LinearSpec proj{.in_features = h, .out_features = c, .init_std = 0.3};
  Generator g1(9), g2(9);
  const nn::BuildContext bctx(g2, &ctx);
  Chain serial{nn::make_layer_norm({.dim = c}), std::make_shared<nn::Linear>(fc, g1),
               std::make_shared<nn::Linear>(proj, g1)};
  Chain twin{std::make_shared<nn::LayerNorm3D>(nn::LayerNormSpec{.dim = c}, bctx),
             std::make_shared<nn::Linear3D>(fc, bctx), std::make_shared<nn::Linear3D>(proj, bctx)};
  RANK_CHECK(g1.offset() == g2.offset(), what, ": generator offsets differ");
  uint64_t bias_seed = 44;  // nonzero biases, so their layout shows
  for (auto& [s, tw] : {std::pair{serial.fc, twin.fc}, std::pair{serial.proj, twin.proj}})
    set_param(s->bias(), tw->bias(), tw->named_placements().back().second,
              smooth({s->spec().out_features}, bias_seed++));
  const Tensor x = smooth({b, t, c}, 41, 1.5, -0.5), gy = smooth(x.shape(), 42);
  Tensor xs = leaf(x), xt = leaf(piece(x, at));
  Tensor ys = serial.forward(xs);
  autograd::backward({sum(mul(ys, gy))});
  reset(cube);
  ctx.tensor_group()->reset_stats();
  Tensor yt = twin.forward(xt);
  Volume fwd, bwd;
  predict_layer_norm(fwd, bwd, q, b / q * t, c);
  predict_linear(fwd, bwd, q, b / q * t, c, h, true, true);
  predict_linear(fwd, bwd, q, b / q * t, h, c, true, true);
  check_volume(cube, fwd, what + " forward");
  check_close(yt, piece(ys.detach(), at), what + " output");
  reset(cube);
  autograd::backward({sum(mul(yt, piece(gy, at)))});
  check_volume(cube, bwd, what + " backward");
  RANK_CHECK(ctx.tensor_group()->stats().total().calls == 0,
             "the 3D chain used the whole tensor group: ", ctx.tensor_group()->stats().str());
  check_close(xt.grad(), piece(xs.grad(), at), what + " input gradient");
  check_params(*twin.ln, *serial.ln, ctx, what + " ln");
  check_params(*twin.fc, *serial.fc, ctx, what + " fc");
  check_params(*twin.proj, *serial.proj, ctx, what + " proj");
  if (ctx.rank() == 0) {
    auto sent = [](const Volume& v) {
      return v.input.total().bytes_sent + v.weight.total().bytes_sent + v.output.total().bytes_sent;
    };
    const int64_t sent_fwd = sent(fwd), sent_bwd = sent(bwd);
    std::printf(
        "tp 3d volume: LayerNorm -> MLP chain (B %lld, T %lld, C %lld, H %lld) per rank: "
        "forward %lld B sent, backward %lld B sent (counted equal to the prediction)\n",
        (long long)b, (long long)t, (long long)c, (long long)h, (long long)sent_fwd,
        (long long)sent_bwd);
  }
}

// ---------------------------------------------------------------- errors

void check_errors(const ParallelContext& ctx, const Cube3D& cube) {
  Generator gen(0);
  const nn::BuildContext bctx(gen, &ctx);
  const int q = cube.q();
  reset(cube);
  std::string e = error_of([&] {
    parallel::tensor::linear_3d(smooth({3, 4}, 1), smooth({2 * q, 5}, 2), cube);
  });
  RANK_CHECK(e.find("[linear_3d]") != std::string::npos && e.find("(3, 4)") != std::string::npos,
             "linear_3d shape error: '", e, "'");
  e = error_of([&] {
    parallel::tensor::linear_3d(smooth({3, 4}, 1), smooth({q, 4}, 2),
                                Cube3D{.input = cube.input, .weight = cube.weight});
  });
  RANK_CHECK(e.find("2 of the 3") != std::string::npos, "cube error: '", e, "'");
  e = error_of([&] { split_3d(smooth({q, q * q + 1}, 1), cube); });
  RANK_CHECK(e.find("[split_3d]") != std::string::npos && e.find("q^2") != std::string::npos,
             "split_3d error: '", e, "'");
  e = error_of([&] { nn::Linear3D({.in_features = q + 1, .out_features = q * q * q}, bctx); });
  RANK_CHECK(e.find("[Linear3D]") != std::string::npos && e.find("q^2") != std::string::npos,
             "Linear3D error: '", e, "'");
  e = error_of([&] { nn::Linear3D({.in_features = q * q, .out_features = q * q}, bctx); });
  RANK_CHECK(e.find("[Linear3D bias]") != std::string::npos && e.find("q^3") != std::string::npos,
             "Linear3D bias error: '", e, "'");
  e = error_of([&] { nn::LayerNorm3D({.dim = q * q}, bctx); });
  RANK_CHECK(e.find("[LayerNorm3D]") != std::string::npos && e.find("q^3") != std::string::npos,
             "LayerNorm3D error: '", e, "'");
  nn::Linear3D lin({.in_features = 2 * q * q, .out_features = q * q * q}, bctx);
  e = error_of([&] { lin.forward(smooth({q, 2 * q * q}, 1)); });  // the whole input, not a piece
  RANK_CHECK(e.find("[Linear3D]") != std::string::npos && e.find("3D piece") != std::string::npos,
             "Linear3D input error: '", e, "'");
  e = error_of([&] { nn::Linear3D({.in_features = q * q, .out_features = q * q * q}, gen); });
  RANK_CHECK(e.find("[Linear3D]") != std::string::npos && e.find("serial") != std::string::npos,
             "Linear3D serial context error: '", e, "'");
  check_nothing_moved({cube.input, cube.weight, cube.output});
}

}  // namespace

int main(int argc, char** argv) {
  return parallel::run_distributed(
      argc, argv, [](const std::shared_ptr<parallel::Communicator>& world) {
        ParallelContext ctx(cube_config(world->size(), "tp_3d_ranks"), world);
        const Cube3D cube = parallel::tensor::cube_3d(ctx);
        const int q = cube.q();
        check_cube(ctx, cube);
        check_errors(ctx, cube);
        check_cube_of_one();
        uint64_t seed = 100;
        for (const LinearCase& c :
             {LinearCase{}, LinearCase{.fused = 3}, LinearCase{.input_grad = false},
              LinearCase{.fed = false}, LinearCase{.fused = 3, .fed = false}})
          check_linear_3d(ctx, cube, c, seed += 10);
        check_linear(ctx, nn::LinearInit::uniform, /*bias=*/true, 1);
        check_linear(ctx, nn::LinearInit::normal, /*bias=*/false, 1);
        check_linear(ctx, nn::LinearInit::normal, /*bias=*/true, 3);
        check_layer_norm(ctx, true, true);
        check_layer_norm(ctx, true, false);
        check_layer_norm(ctx, false, false);
        check_chain(ctx);
        testing3d::check_embeddings(ctx);
        testing3d::check_attention(ctx);
        testing3d::check_gpt(ctx, /*tied=*/true, /*dropout=*/0.1);
        testing3d::check_gpt(ctx, /*tied=*/false, /*dropout=*/0.0);
        world->barrier()->wait();
        if (world->rank() == 0)
          std::printf("tp 3d: all checks passed on %d x %d x %d ranks (%lld checks on rank 0)\n", q,
                      q, q, static_cast<long long>(checks_passed()));
        return 0;
      });
}

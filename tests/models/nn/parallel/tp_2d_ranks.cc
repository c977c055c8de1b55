// Multi-rank program run by tp_2d_test.sh: 2D (SUMMA) tensor parallelism on a q x q grid (P = q^2
// ranks), or 2.5D of depth 2 on 2 q^2 ranks (twin_checks.h: summa_config), against the serial math
// from the same seed. The SUMMA products (forward, backward, ranks
// whose output feeds no loss, second derivatives), Linear2D, LayerNorm2D and a LayerNorm -> MLP
// built by the factories: outputs, every parameter and input gradient gathered (by placement or
// gather_2d) within 1e-5 relative of the serial layers; the bytes each rank moves per group and
// collective kind equal the prediction written out below; errors. Every rank draws the same full
// tensors from one seed, so each can compute what one process would. A failure aborts the job.
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
#include "models/nn/nn.h"
#include "models/nn/parallel/layer_norm_2d.h"
#include "models/nn/parallel/linear_2d.h"
#include "parallel/comm/mpi_runtime.h"
#include "parallel/mesh/parallel_context.h"
#include "parallel/tensor/placement_ops.h"
#include "parallel/tensor/summa.h"
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

constexpr int64_t kF32 = 4;

// ---------------------------------------------------------------- helpers

// `full` with the blocks of the grid ranks that do not feed the loss zeroed.
Tensor keep_blocks(const Tensor& full, int q, const std::function<bool(int, int)>& feeds) {
  Tensor out = full.clone();
  const int64_t rows = full.size(0) / q, cols = full.size(-1) / q;
  for (int r = 0; r < q; ++r)
    for (int s = 0; s < q; ++s)
      if (!feeds(r, s)) out.narrow(0, r * rows, rows).narrow(out.dim() - 1, s * cols, cols).zero_();
  return out;
}

// ---------------------------------------------------------------- the predicted volume
//
// Per rank and call, the counters of comm_types.h (ring traffic for all_reduce / all_gather /
// reduce_scatter, root-based for broadcast / reduce), with bytes the size of this rank's block:
//   q broadcast steps of a block   calls q, payload q * bytes, sent bytes (this rank's own block,
//                                  as the root of one step), received (q - 1) * bytes
//   q reduce steps of a block      calls q, payload q * bytes, sent (q - 1) * bytes (a partial to
//                                  every other step's root), received bytes (as the root once)
//   all_gather / reduce_scatter    calls 1, payload the whole (gathered / input) tensor, sent and
//                                  received (q - 1) / q of it
//   all_reduce                     calls 1, payload the tensor, sent and received 2 (q - 1) / q
// SUMMA per call (summa.h): ab(a, b): row q broadcasts of a, column q broadcasts of b;
// abt(., b) -> c: column q broadcasts of b, row q reduces of c; atb(a, .) -> c: row q broadcasts
// of a, column q reduces of c.
// 2.5D adds the depth group (the weights' gradient sums); the SUMMA products never use it.
using Volume = GridVolume;

void add(CommStats& s, CommKind kind, int64_t calls, int64_t payload, int64_t sent,
         int64_t received) {
  parallel::CommCounter& c = s[kind];
  c.calls += calls;
  c.payload_bytes += payload;
  c.bytes_sent += sent;
  c.bytes_received += received;
}
void broadcast_steps(CommStats& s, int q, int64_t bytes) {
  add(s, CommKind::broadcast, q, q * bytes, bytes, (q - 1) * bytes);
}
void reduce_steps(CommStats& s, int q, int64_t bytes) {
  add(s, CommKind::reduce, q, q * bytes, (q - 1) * bytes, bytes);
}

// ---------------------------------------------------------------- SUMMA products

enum class Op { ab, abt, atb };
const char* op_name(Op op) {
  return op == Op::ab ? "summa_ab" : op == Op::abt ? "summa_abt" : "summa_atb";
}

Tensor apply_summa(Op op, const Tensor& a, const Tensor& b, const SummaGrid& g) {
  switch (op) {
    case Op::ab:
      return parallel::tensor::summa_ab(a, b, g);
    case Op::abt:
      return parallel::tensor::summa_abt(a, b, g);
    case Op::atb:
      return parallel::tensor::summa_atb(a, b, g);
  }
  return Tensor();
}

// The serial product of the whole operands.
Tensor apply_serial(Op op, const Tensor& a, const Tensor& b) {
  switch (op) {
    case Op::ab:
      return matmul(a, b);
    case Op::abt:
      return matmul(a, transpose(b, 0, 1));
    case Op::atb: {
      const int64_t m = a.numel() / a.size(-1);
      return matmul(transpose(reshape(a, {m, a.size(-1)}), 0, 1), reshape(b, {m, b.size(-1)}));
    }
  }
  return Tensor();
}

// Whole operand shapes for op, blocks of odd sizes: rows (3, 5) per block (dim 0 cut, dim 1 not),
// contraction 7 and columns 3 per block.
std::pair<Shape, Shape> operand_shapes(Op op, int q) {
  const int64_t m = 3 * q, k = 7 * q, n = 3 * q;
  switch (op) {
    case Op::ab:
      return {{m, 5, k}, {k, n}};
    case Op::abt:
      return {{m, 5, n}, {k, n}};
    case Op::atb:
      return {{m, 5, k}, {m, 5, n}};
  }
  return {};
}

// The volume of one call of op on blocks of a, b and c bytes, and of its backward (both grads).
void predict(Op op, int q, int64_t a, int64_t b, int64_t c, Volume& fwd, Volume& bwd) {
  switch (op) {
    case Op::ab:  // forward ab(A, B); backward dA = abt(dC, B), dB = atb(A, dC)
      broadcast_steps(fwd.row, q, a);
      broadcast_steps(fwd.col, q, b);
      broadcast_steps(bwd.col, q, b);  // dA
      reduce_steps(bwd.row, q, a);
      broadcast_steps(bwd.row, q, a);  // dB
      reduce_steps(bwd.col, q, b);
      return;
    case Op::abt:  // forward abt(A, B); backward dA = ab(dC, B), dB = atb(dC, A)
      broadcast_steps(fwd.col, q, b);
      reduce_steps(fwd.row, q, c);
      broadcast_steps(bwd.row, q, c);  // dA
      broadcast_steps(bwd.col, q, b);
      broadcast_steps(bwd.row, q, c);  // dB
      reduce_steps(bwd.col, q, b);
      return;
    case Op::atb:  // forward atb(A, B); backward dA = abt(B, dC), dB = ab(A, dC)
      broadcast_steps(fwd.row, q, a);
      reduce_steps(fwd.col, q, c);
      broadcast_steps(bwd.col, q, c);  // dA
      reduce_steps(bwd.row, q, a);
      broadcast_steps(bwd.row, q, a);  // dB
      broadcast_steps(bwd.col, q, c);
      return;
  }
}

// One product forward and backward against the serial one; ranks where feeds(r, s) is false
// backward through a loss that gives the node no gradient (it must run anyway, with zeros).
void check_summa(Op op, const SummaGrid& g, const std::function<bool(int, int)>& feeds,
                 uint64_t seed) {
  const int q = g.q(), r = g.grid_row(), s = g.grid_col();
  const bool fed = feeds(r, s);
  const std::string what = str_cat(op_name(op), " on ", q, " x ", q, fed ? "" : " (not fed)");
  const auto [a_shape, b_shape] = operand_shapes(op, q);
  const Tensor a = smooth(a_shape, seed), b = smooth(b_shape, seed + 1);
  // Serial, with the loss of the feeding ranks' blocks only.
  Tensor as = leaf(a), bs = leaf(b);
  Tensor cs = apply_serial(op, as, bs);
  const Tensor gfull = smooth(cs.shape(), seed + 2);
  autograd::backward({sum(mul(cs, keep_blocks(gfull, q, feeds)))});
  // 2D.
  Tensor at = leaf(block(a, r, s, q)), bt = leaf(block(b, r, s, q));
  reset(g);
  Tensor ct = apply_summa(op, at, bt, g);
  RANK_CHECK(ct.grad_fn() && ct.grad_fn()->always_run(), what, ": expected an always-run node");
  check_close(ct, block(cs.detach(), r, s, q), what + " forward");
  Volume fwd, bwd;
  predict(op, q, at.numel() * kF32, bt.numel() * kF32, ct.numel() * kF32, fwd, bwd);
  check_volume(g, fwd, what + " forward");
  reset(g);
  autograd::backward({fed ? sum(mul(ct, block(gfull, r, s, q))) : sum(drop_grad(ct))});
  check_volume(g, bwd, what + " backward");
  check_close(at.grad(), block(as.grad(), r, s, q), what + " dA");
  check_close(bt.grad(), block(bs.grad(), r, s, q), what + " dB");
}

// The backward is recorded as SUMMA ops under create_graph: with dA = grad(sum(ab(A, B) W), A) =
// W B^T, d/dW sum(dA V) = V B, which the grid must give as ab(V, B)'s block.
void check_summa_double_backward(const SummaGrid& g) {
  const int q = g.q(), r = g.grid_row(), s = g.grid_col();
  const auto [a_shape, b_shape] = operand_shapes(Op::ab, q);
  const Tensor a = smooth(a_shape, 91), b = smooth(b_shape, 92);
  Shape c_shape = a_shape;
  c_shape.back() = b_shape.back();
  const Tensor w = smooth(c_shape, 93), v = smooth(a_shape, 94);
  Tensor at = leaf(block(a, r, s, q)), bt = leaf(block(b, r, s, q)), wt = leaf(block(w, r, s, q));
  Tensor da = autograd::grad({sum(mul(parallel::tensor::summa_ab(at, bt, g), wt))}, {at}, {},
                             {.create_graph = true})[0];
  RANK_CHECK(da.grad_fn() && da.grad_fn()->always_run(),
             "summa_ab double backward: dA has no "
             "SUMMA node");
  check_close(da, block(matmul(w, transpose(b, 0, 1)), r, s, q), "summa_ab dA (create_graph)");
  Tensor dw = autograd::grad({sum(mul(da, block(v, r, s, q)))}, {wt})[0];
  check_close(dw, block(matmul(v, b), r, s, q), "summa_ab second derivative");
}

// A grid of one rank (groups of one, or none) is the serial product, with its gradients, and
// moves nothing.
void check_grid_of_one(const std::shared_ptr<parallel::Communicator>& world) {
  auto one = world->split(world->rank(), 0, "one");
  for (const SummaGrid& g : {SummaGrid{.row = one, .col = one}, SummaGrid{}}) {
    for (Op op : {Op::ab, Op::abt, Op::atb}) {
      const std::string what = str_cat(op_name(op), " on a grid of one");
      const auto [a_shape, b_shape] = operand_shapes(op, 1);
      Tensor as = leaf(smooth(a_shape, 81)), bs = leaf(smooth(b_shape, 82));
      Tensor at = leaf(as), bt = leaf(bs);
      Tensor cs = apply_serial(op, as, bs), ct = apply_summa(op, at, bt, g);
      check_close(ct, cs, what);
      const Tensor w = smooth(cs.shape(), 83);
      autograd::backward({sum(mul(cs, w))});
      autograd::backward({sum(mul(ct, w))});
      check_close(at.grad(), as.grad(), what + " dA");
      check_close(bt.grad(), bs.grad(), what + " dB");
    }
  }
  RANK_CHECK(one->stats().total().calls == 0, "a grid of one moved something");
}

// ---------------------------------------------------------------- layers against serial

// Linear2D from make_linear under each hint: weights drawn as the serial ones; output, input and
// parameter gradients through split_2d / gather_2d from the serial input.
void check_linear(const ParallelContext& ctx, nn::ParallelStyle style, nn::LinearInit init,
                  bool bias) {
  const SummaGrid g = grid_of(ctx);
  const int q = g.q();
  const std::string what = str_cat("Linear2D ", nn::parallel_style_name(style), " init ", int(init),
                                   bias ? " bias" : "", on_grid(g));
  const nn::LinearSpec spec{
      .in_features = 3 * q, .out_features = 2 * q * q, .bias = bias, .init = init};
  const auto [serial, twin] = make_twins(
      ctx, 7, what, [&](const nn::BuildContext& b) { return nn::make_linear(spec, b, style); });
  RANK_CHECK(dynamic_cast<nn::Linear2D*>(twin.get()) && twin->type_name() == "Linear2D" &&
                 twin->parallel_style() == style,
             what, ": make_linear gave ", twin->type_name());
  // Odd batch chunk (3) and sequence (5).
  const int64_t b = 3 * g.batch_parts();
  check_pass(
      smooth({b, 5, spec.in_features}, 21), [&](const Tensor& xs) { return serial->forward(xs); },
      [&](const Tensor& xt) { return gather_2d(twin->forward(split_2d(xt, g)), g); },
      weighted_by(smooth({b, 5, spec.out_features}, 22)), what);
  check_params(*twin, *serial, ctx, what);
}

// LayerNorm2D from make_layer_norm with random affine parameters (cut by placement), on an input
// with a mean offset; every affine variant.
void check_layer_norm(const ParallelContext& ctx, bool affine, bool bias) {
  Generator unused(0);
  const SummaGrid g = grid_of(ctx);
  const int q = g.q();
  const std::string what =
      str_cat("LayerNorm2D", affine ? " affine" : "", bias ? " bias" : "", on_grid(g));
  const nn::LayerNormSpec spec{.dim = 3 * q * q, .affine = affine, .bias = bias};
  auto serial = nn::make_layer_norm(spec);
  auto twin = nn::make_layer_norm(spec, nn::BuildContext(unused, &ctx));
  RANK_CHECK(dynamic_cast<nn::LayerNorm2D*>(twin.get()) && twin->type_name() == "LayerNorm2D", what,
             ": make_layer_norm gave ", twin->type_name());
  const auto placements = twin->named_placements();
  if (twin->weight().defined())
    set_param(serial->weight(), twin->weight(), placements[0].second, smooth({spec.dim}, 31));
  if (twin->bias().defined())
    set_param(serial->bias(), twin->bias(), placements[1].second, smooth({spec.dim}, 32));
  const Tensor x = smooth({3 * g.batch_parts(), 5, spec.dim}, 33, 2.0, 3.0);
  check_pass(
      x, [&](const Tensor& xs) { return serial->forward(xs); },
      [&](const Tensor& xt) { return gather_2d(twin->forward(split_2d(xt, g)), g); },
      weighted_by(smooth(x.shape(), 34)), what);
  if (affine) {
    check_params(*twin, *serial, ctx, what);
  } else {
    RANK_CHECK(twin->num_parameters() == 0, what, ": has parameters");
  }
}

// LayerNorm -> MLP (Linear2D -> GELU -> Linear2D), built by the factories, against the serial.
struct LnMlp {
  std::shared_ptr<nn::LayerNorm> ln;
  std::shared_ptr<nn::MLP> mlp;
  Tensor forward(const Tensor& x) const { return mlp->forward(ln->forward(x)); }
};

nn::MLPSpec mlp_spec(int q) {
  return {.d_model = 2 * q * q, .hidden = 0 /* 4 d_model */, .gelu = "tanh", .init_std = 0.3};
}

void check_mlp(const ParallelContext& ctx, const std::string& gelu) {
  const SummaGrid g = grid_of(ctx);
  const int q = g.q();
  const std::string what = str_cat("LayerNorm -> MLP (gelu ", gelu, ")", on_grid(g));
  nn::MLPSpec spec = mlp_spec(q);
  spec.gelu = gelu;
  const nn::LayerNormSpec ln_spec{.dim = spec.d_model};
  const auto [serial, twin] = make_twins(ctx, 9, what, [&](const nn::BuildContext& b) {
    return LnMlp{nn::make_layer_norm(ln_spec, b), nn::make_mlp(spec, b)};
  });
  RANK_CHECK(twin.mlp->c_fc()->type_name() == "Linear2D" &&
                 twin.mlp->c_proj()->type_name() == "Linear2D" &&
                 twin.ln->type_name() == "LayerNorm2D",
             what, ": the factories gave ", twin.ln->type_name(), ", ",
             twin.mlp->c_fc()->type_name(), ", ", twin.mlp->c_proj()->type_name());
  const Tensor x = smooth({3 * g.batch_parts(), 5, spec.d_model}, 41, 1.5, -0.5);
  check_pass(
      x, [&](const Tensor& xs) { return serial.forward(xs); },
      [&](const Tensor& xt) { return gather_2d(twin.forward(split_2d(xt, g)), g); },
      weighted_by(smooth(x.shape(), 42)), what);
  check_params(*twin.ln, *serial.ln, ctx, what + " ln");
  check_params(*twin.mlp, *serial.mlp, ctx, what + " mlp");
}

// ---------------------------------------------------------------- communication volume

// Linear2D alone and the LayerNorm -> MLP block on this rank's blocks (no split / gather), forward
// and backward counted apart, against the prediction. With n = B / q * T rows per block (2.5D:
// B / (d q) * T, each depth layer the 2D volume on its batch slice):
//   Linear2D (in -> out, bias), x = n in/q, w = out/q in/q, bytes f32:
//     forward   row: q broadcasts of x;  column: q broadcasts of w, all_gather of out/q
//     backward  row: q reduces of x (dX), q broadcasts of x (dW);
//               column: q broadcasts of w (dX), q reduces of w (dW), reduce_scatter of out/q
//   LayerNorm2D (C, affine with bias):
//     forward   row: 2 all_reduces of n;  column: 2 all_gathers of C/q
//     backward  row: 2 all_reduces of n;  column: 2 reduce_scatters of C/q
//   2.5D, depth d, backward: every parameter's gradient summed over the depth group, one
//     all_reduce each: the Linear2D weight block (w) and bias shard (out/q^2), the LayerNorm2D
//     weight and bias shards (C/q^2)
//   The block: LayerNorm2D(C), Linear2D(C -> H), GELU, Linear2D(H -> C), the sums of the above.
void predict_linear(Volume& fwd, Volume& bwd, int q, int d, int64_t n, int64_t in, int64_t out,
                    bool input_grad) {
  const int64_t x = n * in / q * kF32, w = out / q * in / q * kF32, bias = out / q * kF32;
  if (d > 1) {
    ring(bwd.dep, CommKind::all_reduce, d, w);
    ring(bwd.dep, CommKind::all_reduce, d, bias / q);
  }
  broadcast_steps(fwd.row, q, x);
  broadcast_steps(fwd.col, q, w);
  ring(fwd.col, CommKind::all_gather, q, bias);
  if (input_grad) {
    reduce_steps(bwd.row, q, x);
    broadcast_steps(bwd.col, q, w);
  }
  broadcast_steps(bwd.row, q, x);
  reduce_steps(bwd.col, q, w);
  ring(bwd.col, CommKind::reduce_scatter, q, bias);
}

void predict_layer_norm(Volume& fwd, Volume& bwd, int q, int d, int64_t n, int64_t c) {
  for (int i = 0; i < 2; ++i) {  // mean, variance; weight, bias
    if (d > 1) ring(bwd.dep, CommKind::all_reduce, d, c / q / q * kF32);
    ring(fwd.row, CommKind::all_reduce, q, n * kF32);
    ring(fwd.col, CommKind::all_gather, q, c / q * kF32);
    ring(bwd.row, CommKind::all_reduce, q, n * kF32);
    ring(bwd.col, CommKind::reduce_scatter, q, c / q * kF32);
  }
}

void check_volumes(const ParallelContext& ctx) {
  Generator gen(5);
  const nn::BuildContext bctx(gen, &ctx);
  const SummaGrid g = bctx.summa_grid();
  const int q = g.q(), d = g.depth();
  const int64_t b = 3 * g.batch_parts(), t = 5, n = b / g.batch_parts() * t;
  {
    const int64_t in = 3 * q, out = 2 * q * q;
    auto lin =
        nn::make_linear({.in_features = in, .out_features = out}, bctx, nn::ParallelStyle::column);
    for (bool input_grad : {true, false}) {
      const std::string what = str_cat("Linear2D volume", input_grad ? "" : " (no input grad)");
      Tensor x = block(smooth({b, t, in}, 51), g);
      if (input_grad) x = leaf(x);
      Volume fwd, bwd;
      predict_linear(fwd, bwd, q, d, n, in, out, input_grad);
      reset(g);
      Tensor y = lin->forward(x);
      check_volume(g, fwd, what + " forward");
      reset(g);
      autograd::backward({sum(mul(y, block(smooth({b, t, out}, 52), g)))});
      check_volume(g, bwd, what + " backward");
      lin->zero_grad();
    }
  }
  {
    const nn::MLPSpec spec = mlp_spec(q);
    const int64_t c = spec.d_model, h = 4 * c;
    LnMlp block2d{nn::make_layer_norm({.dim = c}, bctx), nn::make_mlp(spec, bctx)};
    Volume fwd, bwd;
    predict_layer_norm(fwd, bwd, q, d, n, c);
    predict_linear(fwd, bwd, q, d, n, c, h, true);
    predict_linear(fwd, bwd, q, d, n, h, c, true);
    Tensor x = leaf(block(smooth({b, t, c}, 53), g));
    ctx.tensor_group()->reset_stats();
    reset(g);
    Tensor y = block2d.forward(x);
    check_volume(g, fwd, "LayerNorm -> MLP volume forward");
    reset(g);
    autograd::backward({sum(mul(y, block(smooth({b, t, c}, 54), g)))});
    check_volume(g, bwd, "LayerNorm -> MLP volume backward");
    RANK_CHECK(ctx.tensor_group()->stats().total().calls == 0,
               "the 2D block used the whole tensor group: ", ctx.tensor_group()->stats().str());
    if (ctx.tensor_group()->rank() == 0) {
      const CommStats& row = fwd.row;
      std::printf(
          "tp %s volume: LayerNorm -> MLP block (B %lld, T %lld, C %lld, H %lld)%s per rank: "
          "forward row broadcast %lld B sent / %lld received, column broadcast %lld / "
          "%lld; backward depth all_reduce %lld / %lld\n",
          parallel::tensor_mode_name(ctx.config().tensor.mode), (long long)b, (long long)t,
          (long long)c, (long long)h, on_grid(g).c_str(),
          (long long)row[CommKind::broadcast].bytes_sent,
          (long long)row[CommKind::broadcast].bytes_received,
          (long long)fwd.col[CommKind::broadcast].bytes_sent,
          (long long)fwd.col[CommKind::broadcast].bytes_received,
          (long long)bwd.dep[CommKind::all_reduce].bytes_sent,
          (long long)bwd.dep[CommKind::all_reduce].bytes_received);
    }
  }
}

// ---------------------------------------------------------------- errors

void check_errors(const ParallelContext& ctx) {
  Generator gen(0);
  const nn::BuildContext bctx(gen, &ctx);
  const SummaGrid g = bctx.summa_grid();
  const int q = g.q();
  reset(g);
  std::string e = error_of([&] {
    parallel::tensor::summa_ab(smooth({3, 4}, 1), smooth({5, 2}, 2), g);
  });
  RANK_CHECK(e.find("[summa_ab]") != std::string::npos && e.find("(3, 4)") != std::string::npos &&
                 e.find("(5, 2)") != std::string::npos,
             "summa_ab shape error: '", e, "'");
  e = error_of([&] { parallel::tensor::summa_atb(smooth({3, 4}, 1), smooth({2, 2}, 2), g); });
  RANK_CHECK(e.find("[summa_atb]") != std::string::npos && e.find("same rows") != std::string::npos,
             "summa_atb shape error: '", e, "'");
  e = error_of([&] {
    parallel::tensor::summa_ab(smooth({3, 4}, 1), smooth({4, 2}, 2),
                               SummaGrid{.row = g.row, .col = nullptr});
  });
  RANK_CHECK(e.find("both a row and a column group") != std::string::npos, "grid error: '", e, "'");
  e = error_of([&] { parallel::tensor::split_2d(smooth({q + 1, 2 * q}, 1), g); });
  RANK_CHECK(e.find("[split_2d]") != std::string::npos && e.find("divisible") != std::string::npos,
             "split_2d error: '", e, "'");
  e = error_of([&] { nn::make_linear({.in_features = q + 1, .out_features = 2 * q * q}, bctx); });
  RANK_CHECK(e.find("[Linear2D]") != std::string::npos && e.find("q = ") != std::string::npos,
             "Linear2D error: '", e, "'");
  e = error_of([&] { nn::make_linear({.in_features = q, .out_features = q * q + q}, bctx); });
  RANK_CHECK(e.find("[Linear2D bias]") != std::string::npos && e.find("q^2") != std::string::npos,
             "Linear2D bias error: '", e, "'");
  e = error_of([&] { nn::make_layer_norm({.dim = q * q + q}, bctx); });
  RANK_CHECK(e.find("[LayerNorm2D]") != std::string::npos && e.find("q^2") != std::string::npos,
             "LayerNorm2D error: '", e, "'");
  auto lin = nn::make_linear({.in_features = 2 * q, .out_features = q * q}, bctx);
  e = error_of([&] { lin->forward(smooth({q, 2 * q}, 1)); });  // the whole input, not a block
  RANK_CHECK(e.find("[Linear2D]") != std::string::npos && e.find("2D block") != std::string::npos,
             "Linear2D input error: '", e, "'");
  // The 2D twins of the other layers name the numbers that do not split over the grid.
  e = error_of([&] { nn::make_attention({.d_model = 4 * q * q, .n_heads = q + 1}, bctx); });
  RANK_CHECK(e.find("[MultiHeadAttention2D]") != std::string::npos &&
                 e.find(str_cat("n_heads ", q + 1, " divisible by the 2D grid side q = ", q)) !=
                     std::string::npos,
             "make_attention error: '", e, "'");
  e = error_of([&] {
    nn::make_embedding({.num_embeddings = 8, .dim = q * q + q}, bctx, nn::ParallelStyle::none);
  });
  RANK_CHECK(e.find("[Embedding2D]") != std::string::npos && e.find("q^2") != std::string::npos,
             "make_embedding error: '", e, "'");
  auto table =
      nn::make_embedding({.num_embeddings = 8, .dim = q * q}, bctx, nn::ParallelStyle::vocab);
  // 2.5D splits the batch over the depth layers first: q rows split over the grid rows, not d q.
  const std::string batch_split = g.depth() > 1
                                      ? str_cat("batch B divisible by depth x q = ", g.depth(),
                                                " x ", q, " = ", g.batch_parts())
                                      : str_cat("batch B divisible by the 2D grid side q = ", q);
  for (int64_t rows : {int64_t(q) + 1, g.depth() > 1 ? int64_t(q) : int64_t(q) + 1}) {
    e = error_of([&] { table->forward(zeros({rows, 3}, {.dtype = DType::i64})); });
    RANK_CHECK(e.find("[VocabParallelEmbedding2D]") != std::string::npos &&
                   e.find(batch_split) != std::string::npos,
               "VocabParallelEmbedding2D batch error: '", e, "'");
  }
  if (g.depth() > 1) {
    e = error_of([&] { parallel::tensor::split_2d(smooth({q, 2 * q}, 1), g); });
    RANK_CHECK(e.find("[split_2d]") != std::string::npos &&
                   e.find(str_cat("depth x q = ", g.depth(), " x ", q)) != std::string::npos,
               "split_2d depth error: '", e, "'");
    e = error_of([&] {
      parallel::tensor::summa_ab(smooth({3, 4}, 1), smooth({4, 2}, 2),
                                 SummaGrid{.row = g.row, .col = g.col, .dep = g.dep});
    });
    RANK_CHECK(e.find("both a depth and a batch group") != std::string::npos, "2.5D grid error: '",
               e, "'");
  }
  check_nothing_moved({g.row, g.col, g.dep, g.batch});
}

}  // namespace

int main(int argc, char** argv) {
  return parallel::run_distributed(
      argc, argv, [](const std::shared_ptr<parallel::Communicator>& world) {
        const parallel::ParallelConfig config = summa_config(world->size());
        ParallelContext ctx(config, world);
        const SummaGrid grid = grid_of(ctx);
        const int q = grid.q();
        const bool deep = config.tensor.mode == parallel::TensorMode::two_point_five_d;
        RANK_CHECK(
            q * q * grid.depth() == world->size() && grid.grid_row() == ctx.coord("tp_row") &&
                grid.grid_col() == ctx.coord("tp_col") && grid.depth() == config.tensor.depth &&
                grid.depth_index() == (deep ? ctx.coord("tp_dep") : 0) &&
                (grid.dep != nullptr) == deep,
            "grid coordinates (", grid.depth_index(), ", ", grid.grid_row(), ", ", grid.grid_col(),
            ") vs the mesh's");
        check_errors(ctx);
        check_grid_of_one(world);
        uint64_t seed = 100;
        for (Op op : {Op::ab, Op::abt, Op::atb}) {
          check_summa(
              op, grid, [](int, int) { return true; }, seed += 10);
          // Grid ranks 1, 4, 7, .. feed no loss.
          check_summa(
              op, grid, [q](int r, int s) { return (r * q + s) % 3 != 1; }, seed += 10);
        }
        check_summa_double_backward(grid);
        for (nn::ParallelStyle style :
             {nn::ParallelStyle::column, nn::ParallelStyle::row, nn::ParallelStyle::none})
          check_linear(ctx, style, nn::LinearInit::uniform, /*bias=*/true);
        check_linear(ctx, nn::ParallelStyle::column, nn::LinearInit::normal, /*bias=*/false);
        check_layer_norm(ctx, true, true);
        check_layer_norm(ctx, true, false);
        check_layer_norm(ctx, false, false);
        check_mlp(ctx, "tanh");
        check_mlp(ctx, "none");
        check_volumes(ctx);
        world->barrier()->wait();
        if (world->rank() == 0)
          std::printf("tp %s: all checks passed%s ranks (%lld checks on rank 0)\n",
                      parallel::tensor_mode_name(config.tensor.mode), on_grid(grid).c_str(),
                      static_cast<long long>(checks_passed()));
        return 0;
      });
}

// Multi-rank program run by region_ops_test.sh under mpirun: every tensor-parallel region op's
// (the all-to-all's too) forward and backward against the serial math, on the world and (on 4
// ranks) on a sub-group; ranks whose output does not feed the loss (the always-run path); the bytes
// each op moves; a Megatron MLP, a sequence-parallel block and second derivatives built from the
// ops; identity on a group of one; argument errors. Every rank draws the same full tensors from one
// seed, so each can compute what one process would. Any failure aborts the job non-zero.
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/factory.h"
#include "parallel/comm/mpi_runtime.h"
#include "parallel/tensor/region_ops.h"
#include "tests/parallel/rank_check.h"

using namespace tessera;
using namespace tessera::parallel;
using namespace tessera::parallel::tensor;
using tessera::parallel::testing::error_of;
using tessera::parallel::testing::element;

namespace {

// ---------------------------------------------------------------- helpers

// Normal draws rounded to quarters: sums of a few of them are exact in f32 and bf16 in any order,
// so a reduced result must equal the serial one exactly, whatever order MPI sums in.
Tensor draw(const Shape& shape, uint64_t seed, DType dtype) {
  Generator gen(seed);
  Tensor t = randn(shape, {}, &gen);
  float* v = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = std::round(v[i] * 4.0f) / 4.0f;
  return t.to(dtype);
}

// A smooth draw for the layer chains (no rounding).
Tensor smooth(const Shape& shape, uint64_t seed, double scale = 1.0) {
  Generator gen(seed);
  return mul(randn(shape, {}, &gen), scale);
}

Tensor leaf(const Tensor& t) {
  Tensor l = t.detach().clone();
  l.set_requires_grad(true);
  return l;
}

// Chunk r of p along d (a contiguous copy).
Tensor chunk_of(const Tensor& full, int64_t d, int r, int p) {
  const int64_t n = full.size(d) / p;
  return full.narrow(d, r * n, n).contiguous();
}

// full with the chunks of the ranks not in `feeds` zeroed.
Tensor keep_chunks(const Tensor& full, int64_t d, int p, const std::vector<bool>& feeds) {
  Tensor out = full.clone();
  const int64_t n = full.size(d) / p;
  for (int r = 0; r < p; ++r)
    if (!feeds[size_t(r)]) out.narrow(d, r * n, n).zero_();
  return out;
}

// got == want element-wise within atol + rtol * |want|; the message names the worst element.
void check_close(const Tensor& got, const Tensor& want, double rtol, double atol,
                 const std::string& what) {
  RANK_CHECK(got.defined(), what, ": got an undefined tensor");
  RANK_CHECK(got.shape() == want.shape(), what, ": shape ", shape_str(got.shape()), ", want ",
             shape_str(want.shape()));
  Tensor g = got.to(DType::f32).contiguous(), w = want.to(DType::f32).contiguous();
  int64_t bad = 0, worst = -1;
  double worst_err = 0;
  for (int64_t i = 0; i < g.numel(); ++i) {
    const double a = element(g, i), b = element(w, i), err = std::fabs(a - b);
    if (!(err <= atol + rtol * std::fabs(b))) {
      ++bad;
      if (worst < 0 || err > worst_err) {
        worst = i;
        worst_err = err;
      }
    }
  }
  RANK_CHECK(bad == 0, what, ": ", bad, " of ", g.numel(), " elements differ, worst at flat ",
             worst, ": got ", worst < 0 ? 0.0 : element(g, worst), ", want ",
             worst < 0 ? 0.0 : element(w, worst));
}

void check_exact(const Tensor& got, const Tensor& want, const std::string& what) {
  check_close(got, want, 0.0, 0.0, what);
}

// Passes no gradient to its input, as a head or stage that does not use a tensor would: a loss
// through it reaches the region node, but no gradient arrives there.
struct DropGradNode final : autograd::Node {
  std::string name() const override { return "DropGradNode"; }
  std::vector<Tensor> apply(std::vector<Tensor>&&) override { return {Tensor()}; }
};
Tensor drop_grad(const Tensor& x) {
  Tensor out = x.detach().clone();
  if (auto node = autograd::make_node<DropGradNode>({&x})) autograd::set_history(out, node);
  return out;
}

// The counters of one collective kind equal `calls` calls moving `payload` bytes each, with the
// per-rank traffic of a ring algorithm (comm_types.h), written out here.
void check_traffic(const CommStats& s, CommKind kind, int64_t calls, int64_t payload, int p,
                   const std::string& what) {
  const CommCounter& c = s[kind];
  const std::string where = what + " " + comm_kind_name(kind);
  RANK_CHECK(c.calls == calls, where, ": ", c.calls, " calls, want ", calls);
  RANK_CHECK(c.payload_bytes == calls * payload, where, ": payload ", c.payload_bytes, ", want ",
             calls * payload);
  const int64_t per_call = kind == CommKind::all_reduce ? 2 * (p - 1) * payload / p  // RS + AG
                                                        : (p - 1) * payload / p;     // p-1 chunks
  RANK_CHECK(c.bytes_sent == calls * per_call, where, ": sent ", c.bytes_sent, ", want ",
             calls * per_call);
  RANK_CHECK(c.bytes_received == calls * per_call, where, ": received ", c.bytes_received,
             ", want ", calls * per_call);
}

// Exactly one collective (kind, payload) or none (calls 0) and nothing else.
void check_only(const Communicator& group, CommKind kind, int64_t calls, int64_t payload,
                const std::string& what) {
  CommStats s = group.stats();
  check_traffic(s, kind, calls, payload, group.size(), what);
  RANK_CHECK(s.total().calls == calls, what, ": ", s.total().calls, " calls in all, want ", calls,
             " (", s.str(), ")");
}

// ---------------------------------------------------------------- single ops

enum class Op { copy, reduce, scatter, gather, reduce_scatter, all_gather };
constexpr Op kOps[] = {Op::copy,   Op::reduce,         Op::scatter,
                       Op::gather, Op::reduce_scatter, Op::all_gather};
constexpr const char* kOpNames[] = {"copy_to_region",           "reduce_from_region",
                                    "scatter_to_region",        "gather_from_region",
                                    "reduce_scatter_to_region", "all_gather_to_region"};
const char* op_name(Op op) { return kOpNames[size_t(op)]; }

Tensor apply_op(Op op, const Tensor& x, int64_t dim, const CommPtr& g) {
  switch (op) {
    case Op::copy:
      return copy_to_region(x, g);
    case Op::reduce:
      return reduce_from_region(x, g);
    case Op::scatter:
      return scatter_to_region(x, dim, g);
    case Op::gather:
      return gather_from_region(x, dim, g);
    case Op::reduce_scatter:
      return reduce_scatter_to_region(x, dim, g);
    case Op::all_gather:
      return all_gather_to_region(x, dim, g);
  }
  return Tensor();
}

// What one rank holds for one op, and what the serial math says it must get.
struct OpCase {
  Tensor x;          // this rank's input (a leaf)
  Tensor w;          // loss = sum(y * w) on ranks that feed it
  Tensor want_y;     // the forward output
  Tensor want_grad;  // x's gradient of the sum of the feeding ranks' losses
  CommKind fwd_kind = CommKind::all_reduce, bwd_kind = CommKind::all_reduce;
  int64_t fwd_calls = 0, bwd_calls = 0;
  int64_t fwd_bytes = 0, bwd_bytes = 0;
};

// The serial math, with base = (3, 5, 7) the shape of a chunk and full = base with dim d times p.
// Replicated tensors (one seed on every rank) and per-rank tensors (seed + rank) are drawn whole on
// every rank, so each rank can sum or join them as one process would. For the ops whose output is
// replicated (reduce, gather) the downstream loss is replicated too (one w for all ranks), as in a
// tensor-parallel layer; for the others each rank's loss has its own w.
OpCase make_case(Op op, int64_t d, DType dtype, int r, int p, const std::vector<bool>& feeds,
                 uint64_t seed) {
  const Shape base{3, 5, 7};
  Shape full = base;
  full[size_t(d)] *= p;
  const bool fed = feeds[size_t(r)];
  const int64_t item = int64_t(dtype_size(dtype));
  const int64_t base_bytes = shape_numel(base) * item, full_bytes = shape_numel(full) * item;
  auto per_rank = [&](const Shape& s, uint64_t sd, int rank) {
    return draw(s, sd + 1 + rank, dtype);
  };
  auto sum_over = [&](const Shape& s, uint64_t sd, bool only_feeding) {
    Tensor acc = zeros(s, {.dtype = DType::f32});
    for (int q = 0; q < p; ++q)
      if (!only_feeding || feeds[size_t(q)]) acc = add(acc, per_rank(s, sd, q).to(DType::f32));
    return acc;
  };
  const uint64_t sx = seed, sw = seed + 100;
  OpCase c;
  switch (op) {
    case Op::copy: {  // x replicated; backward: all-reduce of every rank's w
      c.x = leaf(draw(base, sx, dtype));
      c.w = per_rank(base, sw, r);
      c.want_y = c.x.detach();
      c.want_grad = sum_over(base, sw, true);
      c.bwd_kind = CommKind::all_reduce, c.bwd_calls = 1, c.bwd_bytes = base_bytes;
      break;
    }
    case Op::reduce: {  // x per rank, y = their sum; backward: identity
      c.x = leaf(per_rank(base, sx, r));
      c.w = draw(base, sw, dtype);
      c.want_y = sum_over(base, sx, false);
      c.want_grad = fed ? c.w : zeros(base);
      c.fwd_kind = CommKind::all_reduce, c.fwd_calls = 1, c.fwd_bytes = base_bytes;
      break;
    }
    case Op::scatter: {  // x replicated, y its chunk r; backward: all-gather of the chunks' grads
      Tensor x = draw(full, sx, dtype), w = draw(full, sw, dtype);
      c.x = leaf(x);
      c.w = chunk_of(w, d, r, p);
      c.want_y = chunk_of(x, d, r, p);
      c.want_grad = keep_chunks(w, d, p, feeds);
      c.bwd_kind = CommKind::all_gather, c.bwd_calls = 1, c.bwd_bytes = full_bytes;
      break;
    }
    case Op::gather: {  // x chunk r, y the whole; backward: this rank's chunk
      Tensor x = draw(full, sx, dtype), w = draw(full, sw, dtype);
      c.x = leaf(chunk_of(x, d, r, p));
      c.w = w;
      c.want_y = x;
      c.want_grad = fed ? chunk_of(w, d, r, p) : zeros(base);
      c.fwd_kind = CommKind::all_gather, c.fwd_calls = 1, c.fwd_bytes = full_bytes;
      break;
    }
    case Op::reduce_scatter: {  // x per rank (full), y chunk r of their sum; backward: all-gather
      Tensor w = draw(full, sw, dtype);
      c.x = leaf(per_rank(full, sx, r));
      c.w = chunk_of(w, d, r, p);
      c.want_y = chunk_of(sum_over(full, sx, false), d, r, p);
      c.want_grad = keep_chunks(w, d, p, feeds);
      c.fwd_kind = CommKind::reduce_scatter, c.fwd_calls = 1, c.fwd_bytes = full_bytes;
      c.bwd_kind = CommKind::all_gather, c.bwd_calls = 1, c.bwd_bytes = full_bytes;
      break;
    }
    case Op::all_gather: {  // x chunk r, y the whole; backward: reduce-scatter of every rank's w
      Tensor x = draw(full, sx, dtype);
      c.x = leaf(chunk_of(x, d, r, p));
      c.w = per_rank(full, sw, r);
      c.want_y = x;
      c.want_grad = chunk_of(sum_over(full, sw, true), d, r, p);
      c.fwd_kind = CommKind::all_gather, c.fwd_calls = 1, c.fwd_bytes = full_bytes;
      c.bwd_kind = CommKind::reduce_scatter, c.bwd_calls = 1, c.bwd_bytes = full_bytes;
      break;
    }
  }
  return c;
}

// One op, forward and backward, on `group`; `feeds[r]`: whether rank r's output feeds its loss.
// A rank that does not feed still backwards through a loss that reaches the op's node without a
// gradient: the node must run anyway (Node::always_run), or the feeding ranks hang.
void check_op(Op op, int64_t dim, DType dtype, const CommPtr& group, const std::vector<bool>& feeds,
              uint64_t seed) {
  const int r = group->rank(), p = group->size();
  const Shape base{3, 5, 7};
  const int64_t d = wrap_dim(dim, int64_t(base.size()), "test");
  const std::string what =
      str_cat(op_name(op), " dim ", dim, " ", dtype_name(dtype), " on ", group->name(),
              feeds[size_t(r)] ? "" : " (not feeding the loss)");
  OpCase c = make_case(op, d, dtype, r, p, feeds, seed);

  group->reset_stats();
  Tensor y = apply_op(op, c.x, dim, group);
  check_only(*group, c.fwd_kind, c.fwd_calls, c.fwd_bytes, what + " forward");
  RANK_CHECK(y.requires_grad() && y.grad_fn() && y.grad_fn()->always_run(), what,
             ": expected an output with an always-run node");
  RANK_CHECK(y.dtype() == dtype, what, ": output ", y.describe());
  check_exact(y, c.want_y, what + " forward");

  Tensor loss = feeds[size_t(r)] ? sum(mul(y, c.w)) : sum(drop_grad(y));
  group->reset_stats();
  autograd::backward({loss});
  check_only(*group, c.bwd_kind, c.bwd_calls, c.bwd_bytes, what + " backward");
  RANK_CHECK(c.x.grad().dtype() == dtype, what, ": gradient ", c.x.grad().describe());
  check_exact(c.x.grad(), c.want_grad, what + " gradient");
}

// The backward of each op is the conjugate op, recorded under create_graph, so differentiating it
// again gives the op back: with dx = grad(sum(op(x) * w), x), d/dw sum(dx * v) = op(v) (the
// adjoint's adjoint). This tells apart conjugates that agree at first order (the backward of
// scatter_to_region must be gather_from_region, not all_gather_to_region).
void check_double_backward(Op op, int64_t dim, DType dtype, const CommPtr& group, uint64_t seed) {
  const int r = group->rank(), p = group->size();
  const int64_t d = wrap_dim(dim, 3, "test");
  const std::vector<bool> every(size_t(p), true);
  OpCase c = make_case(op, d, dtype, r, p, every, seed);
  const std::string what = str_cat(op_name(op), " dim ", dim, " ", dtype_name(dtype), " on ",
                                   group->name(), " double backward");
  Tensor w = leaf(c.w);
  Tensor dx = autograd::grad({sum(mul(apply_op(op, c.x, dim, group), w))}, {c.x}, {},
                             {.create_graph = true})[0];
  RANK_CHECK(dx.requires_grad() && dx.grad_fn() && dx.grad_fn()->always_run(), what,
             ": expected the backward recorded as a region op");
  Tensor v = draw(c.x.shape(), seed + 200 + uint64_t(r), dtype);
  Tensor dw = autograd::grad({sum(mul(dx, v))}, {w})[0];
  check_exact(dw, apply_op(op, v, dim, group), what);
}

void check_ops(const CommPtr& group, uint64_t seed) {
  const int p = group->size();
  std::vector<bool> every(size_t(p), true), some(size_t(p), false);
  for (int r = 0; r < p; r += 2) some[size_t(r)] = true;  // even ranks feed, odd ones do not
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (Op op : kOps) {
      const bool has_dim = op != Op::copy && op != Op::reduce;
      for (int64_t dim : {int64_t(0), int64_t(1), int64_t(-1)}) {
        if (!has_dim && dim != 0) continue;
        for (const auto* feeds : {&every, &some}) check_op(op, dim, dtype, group, *feeds, seed++);
        check_double_backward(op, dim, dtype, group, seed++);
      }
    }
  }
}

// all_to_all_to_region: rank r's x (3, 5, 7 with split dim times p) sends its chunk s along
// split_dim to rank s, which joins the chunks of every rank along concat_dim; backward sends each
// gradient chunk back. Forward, gradient, the bytes each way (an all-to-all of x's size, then of
// y's), and the backward recorded as the all-to-all back (differentiated again it gives the op).
void check_all_to_all(const CommPtr& group, uint64_t seed) {
  const int r = group->rank(), p = group->size();
  const std::pair<int64_t, int64_t> dims[] = {{0, 2}, {2, 0}, {1, 1}, {0, -1}};
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (const auto& [split, concat_dim] : dims) {
      const int64_t concat = wrap_dim(concat_dim, 3, "test");
      const std::string what = str_cat("all_to_all_to_region split ", split, " concat ", concat_dim,
                                       " ", dtype_name(dtype), " on ", group->name());
      Shape in_shape{3, 5, 7}, out_shape{3, 5, 7};
      in_shape[size_t(split)] *= p;
      out_shape[size_t(concat)] *= p;
      std::vector<Tensor> xs, ws, want_y, want_grad;  // every rank's x and w; this rank's results
      for (int s = 0; s < p; ++s) {
        xs.push_back(draw(in_shape, seed + uint64_t(s), dtype));
        ws.push_back(draw(out_shape, seed + 100 + uint64_t(s), dtype));
      }
      for (int s = 0; s < p; ++s) {
        want_y.push_back(chunk_of(xs[size_t(s)], split, r, p));
        want_grad.push_back(chunk_of(ws[size_t(s)], concat, r, p));
      }
      seed += 200;
      const int64_t bytes = shape_numel(in_shape) * int64_t(dtype_size(dtype));
      Tensor x = leaf(xs[size_t(r)]);
      group->reset_stats();
      Tensor y = all_to_all_to_region(x, split, concat_dim, group);
      check_only(*group, CommKind::all_to_all, 1, bytes, what + " forward");
      RANK_CHECK(y.grad_fn() && y.grad_fn()->always_run(), what, ": expected an always-run node");
      check_exact(y, cat(want_y, concat), what + " forward");
      group->reset_stats();
      autograd::backward({sum(mul(y, ws[size_t(r)]))});
      check_only(*group, CommKind::all_to_all, 1, bytes, what + " backward");
      check_exact(x.grad(), cat(want_grad, split), what + " gradient");
      Tensor w = leaf(ws[size_t(r)]);
      Tensor dx = autograd::grad({sum(mul(all_to_all_to_region(x, split, concat_dim, group), w))},
                                 {x}, {}, {.create_graph = true})[0];
      const Tensor v = draw(in_shape, seed++, dtype);
      check_exact(autograd::grad({sum(mul(dx, v))}, {w})[0],
                  all_to_all_to_region(v, split, concat_dim, group), what + " double backward");
    }
  }
}

// ---------------------------------------------------------------- layers built from the ops

// Megatron's MLP: copy -> column-parallel linear -> tanh -> row-parallel linear -> reduce, against
// the serial MLP from the same full weights. With only_rank0, the other ranks' losses do not use
// the output: their nodes still run (with zeros), rank 0 gets its shards' serial gradients.
void check_megatron_mlp(const CommPtr& group, bool only_rank0) {
  const int r = group->rank(), p = group->size();
  const bool fed = !only_rank0 || r == 0;
  const int64_t B = 3, C = 5, H = 3 * p;
  Tensor x = smooth({B, C}, 11), w1 = smooth({H, C}, 12, 0.5), w2 = smooth({C, H}, 13, 0.5);
  Tensor g = smooth({B, C}, 14);
  // Serial.
  Tensor xs = leaf(x), w1s = leaf(w1), w2s = leaf(w2);
  Tensor zs = linear(tanh(linear(xs, w1s)), w2s);
  autograd::backward({sum(mul(zs, g))});
  // Tensor parallel: w1 split by rows (output features), w2 by columns (input features).
  Tensor xt = leaf(x), w1t = leaf(chunk_of(w1, 0, r, p)), w2t = leaf(chunk_of(w2, 1, r, p));
  Tensor zt = reduce_from_region(linear(tanh(linear(copy_to_region(xt, group), w1t)), w2t), group);
  const std::string what = str_cat("megatron mlp on ", group->name(), fed ? "" : " (rank not fed)");
  check_close(zt, zs, 1e-5, 1e-5, what + " output");
  group->reset_stats();
  autograd::backward({fed ? sum(mul(zt, g)) : sum(drop_grad(zt))});
  // The backward is one all-reduce of x's gradient on every rank, fed or not.
  check_only(*group, CommKind::all_reduce, 1, B * C * 4, what + " backward");
  if (fed) {
    check_close(w1t.grad(), chunk_of(w1s.grad(), 0, r, p), 1e-5, 1e-5, what + " w1 grad");
    check_close(w2t.grad(), chunk_of(w2s.grad(), 1, r, p), 1e-5, 1e-5, what + " w2 grad");
  } else {
    check_exact(w1t.grad(), zeros(w1t.shape()), what + " w1 grad");
    check_exact(w2t.grad(), zeros(w2t.shape()), what + " w2 grad");
  }
  if (!only_rank0) check_close(xt.grad(), xs.grad(), 1e-5, 1e-5, what + " x grad");
}

// Megatron's sequence parallelism: all-gather the sequence shards -> column linear -> tanh ->
// row linear -> reduce-scatter back to sequence shards, against the serial block.
void check_sequence_parallel(const CommPtr& group) {
  const int r = group->rank(), p = group->size();
  const int64_t B = 2, T = 3 * p, C = 5, H = 2 * p;
  Tensor x = smooth({B, T, C}, 21), w1 = smooth({H, C}, 22, 0.5), w2 = smooth({C, H}, 23, 0.5);
  Tensor g = smooth({B, T, C}, 24);
  Tensor xs = leaf(x), w1s = leaf(w1), w2s = leaf(w2);
  autograd::backward({sum(mul(linear(tanh(linear(xs, w1s)), w2s), g))});
  Tensor xt = leaf(chunk_of(x, 1, r, p)), w1t = leaf(chunk_of(w1, 0, r, p));
  Tensor w2t = leaf(chunk_of(w2, 1, r, p));
  Tensor full = all_gather_to_region(xt, 1, group);
  Tensor zt = reduce_scatter_to_region(linear(tanh(linear(full, w1t)), w2t), 1, group);
  const std::string what = str_cat("sequence-parallel block on ", group->name());
  Tensor zs;
  {
    autograd::NoGradGuard no_grad;
    zs = linear(tanh(linear(x, w1)), w2);
  }
  check_close(zt, chunk_of(zs, 1, r, p), 1e-5, 1e-5, what + " output");
  autograd::backward({sum(mul(zt, chunk_of(g, 1, r, p)))});
  check_close(xt.grad(), chunk_of(xs.grad(), 1, r, p), 1e-5, 1e-5, what + " x grad");
  check_close(w1t.grad(), chunk_of(w1s.grad(), 0, r, p), 1e-5, 1e-5, what + " w1 grad");
  check_close(w2t.grad(), chunk_of(w2s.grad(), 1, r, p), 1e-5, 1e-5, what + " w2 grad");
}

// scatter -> tanh -> gather along the last dim equals tanh, with tanh's gradient.
void check_scatter_gather(const CommPtr& group) {
  const int p = group->size();
  Tensor x = smooth({2, 3, 2 * p}, 31), w = smooth({2, 3, 2 * p}, 32);
  Tensor xt = leaf(x);
  Tensor y = gather_from_region(tanh(scatter_to_region(xt, -1, group)), -1, group);
  const std::string what = str_cat("scatter/gather on ", group->name());
  Tensor t = tanh(x);
  check_close(y, t, 1e-6, 1e-6, what + " output");
  autograd::backward({sum(mul(y, w))});
  check_close(xt.grad(), mul(w, 1.0 - square(t)), 1e-6, 1e-6, what + " grad");
}

// Second derivatives through the ops (their backward is recorded under create_graph):
// all_gather_to_region: L = sum_r sum(X^2 * W_r), dL/dX = 2 X sum W; then M = sum(dL/dX * V),
// dM/dX = 2 V sum W. copy_to_region: the same with x replicated and V replicated.
void check_second_order(const CommPtr& group) {
  const int r = group->rank(), p = group->size();
  const Shape full{3, 2 * p};
  Tensor x = smooth(full, 41), v = smooth(full, 42);
  Tensor w_sum = zeros(full);
  for (int q = 0; q < p; ++q) w_sum = add(w_sum, smooth(full, 50 + q));
  Tensor w = smooth(full, 50 + r);
  const std::string what = str_cat("second order on ", group->name());
  {
    Tensor xt = leaf(chunk_of(x, 1, r, p));
    Tensor y = all_gather_to_region(xt, 1, group);
    Tensor dx = autograd::grad({sum(mul(mul(y, y), w))}, {xt}, {}, {.create_graph = true})[0];
    check_close(dx, chunk_of(mul(mul(x, w_sum), 2.0), 1, r, p), 1e-5, 1e-5,
                what + " all_gather d1");
    RANK_CHECK(dx.requires_grad(), what, ": the first derivative has no graph");
    Tensor d2 = autograd::grad({sum(mul(dx, chunk_of(v, 1, r, p)))}, {xt})[0];
    check_close(d2, chunk_of(mul(mul(v, w_sum), 2.0), 1, r, p), 1e-5, 1e-5,
                what + " all_gather d2");
  }
  {
    Tensor xt = leaf(x);
    Tensor y = copy_to_region(xt, group);
    Tensor dx = autograd::grad({sum(mul(mul(y, y), w))}, {xt}, {}, {.create_graph = true})[0];
    check_close(dx, mul(mul(x, w_sum), 2.0), 1e-5, 1e-5, what + " copy d1");
    Tensor d2 = autograd::grad({sum(mul(dx, v))}, {xt})[0];
    check_close(d2, mul(mul(v, w_sum), 2.0), 1e-5, 1e-5, what + " copy d2");
  }
}

// ---------------------------------------------------------------- groups of one, errors

void check_identity(const CommPtr& world) {
  auto single = world->split(world->rank(), 0, "single");
  RANK_CHECK(single && single->size() == 1, "expected a group of one");
  Tensor x = leaf(smooth({4, 6}, 61));
  for (const CommPtr& g : {single, CommPtr()}) {
    for (Op op : kOps) {
      Tensor y = apply_op(op, x, 1, g);
      RANK_CHECK(y.is_same(x), op_name(op), " on ", g ? "a group of one" : "no group",
                 ": expected x itself");
    }
  }
  RANK_CHECK(single->stats().total().calls == 0, "a group of one moved something");
}

void check_errors(const CommPtr& group) {
  const int p = group->size();
  Tensor odd = smooth({3, 2 * p + 1}, 71);
  std::string e = error_of([&] { scatter_to_region(odd, 1, group); });
  RANK_CHECK(e.find("[scatter_to_region]") != std::string::npos &&
                 e.find(str_cat("divisible by the size ", p)) != std::string::npos &&
                 e.find(shape_str(odd.shape())) != std::string::npos,
             "scatter error: '", e, "'");
  e = error_of([&] { reduce_scatter_to_region(odd, -1, group); });
  RANK_CHECK(e.find("[reduce_scatter_to_region]") != std::string::npos &&
                 e.find("divisible") != std::string::npos,
             "reduce_scatter error: '", e, "'");
  e = error_of([&] { gather_from_region(odd, 2, group); });
  RANK_CHECK(
      e.find("[gather_from_region]") != std::string::npos && e.find("dim") != std::string::npos,
      "gather dim error: '", e, "'");
  e = error_of([&] { copy_to_region(Tensor(), group); });
  RANK_CHECK(e.find("[copy_to_region] expected a defined tensor") != std::string::npos,
             "undefined error: '", e, "'");
  RANK_CHECK(group->stats().total().calls == 0, "a refused op moved something");
}

void run_all(const CommPtr& group, uint64_t seed) {
  group->reset_stats();
  check_errors(group);
  check_ops(group, seed);
  check_all_to_all(group, seed + 3000);
  check_megatron_mlp(group, /*only_rank0=*/false);
  check_megatron_mlp(group, /*only_rank0=*/true);
  check_sequence_parallel(group);
  check_scatter_gather(group);
  check_second_order(group);
}

}  // namespace

int main(int argc, char** argv) {
  return run_distributed(argc, argv, [](const CommPtr& world) {
    check_identity(world);
    run_all(world, 1000);
    if (world->size() % 2 == 0 && world->size() > 2) {
      // Two groups of half the world each, interleaved (ranks 0, 2, .. and 1, 3, ..): the ops
      // must use the group's rank, not the world's.
      auto half = world->split(world->rank() % 2, world->rank(), "half");
      run_all(half, 5000);
    }
    world->barrier()->wait();
    if (world->rank() == 0) {
      std::printf("region_ops: all checks passed on %d ranks (%lld checks on rank 0)\n",
                  world->size(), static_cast<long long>(parallel::testing::checks_passed()));
    }
    return 0;
  });
}

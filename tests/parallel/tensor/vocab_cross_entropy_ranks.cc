// Multi-rank program run by tensor_test.sh (on 2, 3 and 4 ranks): the vocab-parallel
// cross-entropy against the serial cross_entropy on the full logits, every rank computing both
// from the same seeded data. Loss and the logits' gradient (gathered over the group) must agree
// within 1e-6 relative for f32 (the dtype's tolerance for the 16-bit gradients), the padding must
// get exactly zero gradient, and the forward must move exactly two all-reduces of per-row
// statistics and the backward nothing. Any failed check aborts the job non-zero.
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/factory.h"
#include "parallel/comm/mpi_runtime.h"
#include "parallel/tensor/vocab_cross_entropy.h"
#include "tests/parallel/rank_check.h"

using namespace tessera;
using namespace tessera::parallel;
using tensor::VocabShard;

namespace {

using CommPtr = std::shared_ptr<Communicator>;

struct Case {
  int64_t vocab = 37;
  int64_t multiple = 1;
  Shape batch{12};  // the targets' shape: (N) or (B, T)
  DType dtype = DType::f32;
  CrossEntropyOptions opts{};
  bool all_ignored = false;

  std::string str() const {
    return str_cat("V=", vocab, " multiple=", multiple, " targets ", shape_str(batch), " ",
                   dtype_name(dtype), " smoothing=", opts.label_smoothing,
                   " reduction=", opts.reduction, " ignore_index=", opts.ignore_index,
                   all_ignored ? " all ignored" : "");
  }
};

// The full padded logits (batch..., V_pad), the same on every rank. The padding columns hold a
// large logit: counted by mistake, it would dominate every row's softmax.
Tensor padded_logits(const Case& c, int64_t padded, uint64_t seed) {
  Shape shape = c.batch;
  shape.push_back(padded);
  Generator gen(seed);
  Tensor x = mul(randn(shape, {}, &gen), 2.0);
  x.narrow(int64_t(shape.size()) - 1, c.vocab, padded - c.vocab).fill_(30.0);
  return x.to(c.dtype);
}

// Global ids spread over every rank's slice (the last real id included), every fifth ignored.
Tensor make_targets(const Case& c, uint64_t seed) {
  const int64_t n = shape_numel(c.batch);
  std::vector<int64_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    t[size_t(i)] = (i * 7 + int64_t(seed) * 3) % c.vocab;
    if (i == 1) t[size_t(i)] = c.vocab - 1;
    if (c.all_ignored || i % 5 == 3) t[size_t(i)] = c.opts.ignore_index;
  }
  return from_vector(t, c.batch, {.dtype = DType::i64});
}

// The incoming gradient: per-row weights for "none", a scale other than 1 for the scalar losses.
Tensor incoming_grad(const Tensor& loss, uint64_t seed) {
  if (loss.dim() == 0) return full(Shape{}, 1.75);
  Generator gen(seed + 1000);
  return randn(loss.shape(), {}, &gen);
}

// loss (any shape, f32) against the serial loss: relative 1e-6 per element, NaN where NaN.
void check_loss(const Tensor& got, const Tensor& want, const std::string& what) {
  RANK_CHECK(got.shape() == want.shape() && got.dtype() == DType::f32, "loss shape ",
             shape_str(got.shape()), " vs ", shape_str(want.shape()), " ", what);
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double g = testing::element(got, i), w = testing::element(want, i);
    if (std::isnan(w)) {
      RANK_CHECK(std::isnan(g), "loss ", i, " got ", g, ", want NaN: ", what);
      continue;
    }
    RANK_CHECK(std::fabs(g - w) <= 1e-6 * std::fabs(w), "loss ", i, " got ", g, ", want ", w, ": ",
               what);
  }
}

// This rank's gradient slices from every rank of the group, as the (N, V_pad) f32 gradient.
Tensor gather_grad(const Tensor& local_grad, int64_t n, const CommPtr& group) {
  const int p = group->size();
  const int64_t local = local_grad.size(-1);
  Tensor mine = local_grad.to(DType::f32).contiguous().reshape({n * local});
  Tensor all = empty({p * n * local});
  group->all_gather(mine, all)->wait();
  return all.reshape({p, n, local}).permute({1, 0, 2}).contiguous().reshape({n, p * local});
}

// got (N, V_pad) against the serial gradient want (N, V): the max error within tol of the largest
// gradient (a normwise bound: softmax terms that nearly cancel have no per-element relative error),
// the padding exactly 0.
void check_grad(const Tensor& got, const Tensor& want, int64_t vocab, double tol,
                const std::string& what) {
  const int64_t n = want.size(0), padded = got.size(1);
  double scale = 0.0, worst = 0.0;
  int64_t worst_at = -1;
  for (int64_t i = 0; i < n * vocab; ++i)
    scale = std::fmax(scale, std::fabs(testing::element(want, i)));
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t v = 0; v < vocab; ++v) {
      const double e =
          std::fabs(testing::element(got, r * padded + v) - testing::element(want, r * vocab + v));
      if (e > worst || worst_at < 0) worst = e, worst_at = r * vocab + v;
    }
    for (int64_t v = vocab; v < padded; ++v)
      RANK_CHECK(testing::element(got, r * padded + v) == 0.0, "padding gradient at row ", r,
                 " id ", v, ": ", what);
  }
  RANK_CHECK(worst <= tol * scale, "gradient error ", worst, " at flat ", worst_at, " exceeds ",
             tol, " x max |grad| ", scale, ": ", what);
}

// The gradient tolerance: f32 1e-6 relative; 16-bit gradients may round either way (one ulp).
double grad_tolerance(DType dtype) {
  return dtype == DType::f32 ? 1e-6 : testing::tolerance(dtype);
}

void check_case(const Case& c, const CommPtr& group, uint64_t seed) {
  const std::string what =
      str_cat(c.str(), " on group ", group->name(), " (", group->size(), " ranks)");
  const VocabShard shard = tensor::vocab_shard(c.vocab, group->rank(), group->size(), c.multiple);
  const Tensor full_logits = padded_logits(c, shard.padded_vocab_size, seed);
  const Tensor targets = make_targets(c, seed);
  const int64_t last = full_logits.dim() - 1, n = shape_numel(c.batch);

  // Serial: cross_entropy on the unpadded logits.
  Tensor serial_in = full_logits.narrow(last, 0, c.vocab).clone().set_requires_grad(true);
  Tensor serial_loss = cross_entropy(serial_in, targets, c.opts);
  autograd::backward({serial_loss}, {incoming_grad(serial_loss, seed)});

  // Parallel: this rank's slice of the padded logits only.
  Tensor local = full_logits.narrow(last, shard.start, shard.local).clone().set_requires_grad(true);
  group->reset_stats();
  Tensor loss = tensor::vocab_parallel_cross_entropy(local, targets, shard, c.opts, group);
  const CommStats forward = group->stats();
  check_loss(loss, serial_loss.detach(), what);
  autograd::backward({loss}, {incoming_grad(loss, seed)});
  const CommStats after = group->stats();

  // Two all-reduces of per-row statistics (the max; then exp sums, target logits and, with
  // smoothing, logit sums), nothing else, and nothing in the backward. One rank: none.
  const bool talks = n > 0 && group->size() > 1;
  const int64_t rows = talks ? 1 + (c.opts.label_smoothing != 0.0 ? 3 : 2) : 0;
  RANK_CHECK(forward[CommKind::all_reduce].calls == (talks ? 2 : 0) &&
                 forward[CommKind::all_reduce].payload_bytes == rows * n * 4 &&
                 forward.total().calls == forward[CommKind::all_reduce].calls,
             "forward traffic ", forward.str(), ": ", what);
  RANK_CHECK(after.total().calls == forward.total().calls, "backward traffic ", after.str(), ": ",
             what);

  RANK_CHECK(local.grad().defined() && local.grad().shape() == local.shape() &&
                 local.grad().dtype() == c.dtype,
             "local gradient ", local.grad().defined() ? local.grad().describe() : "undefined",
             ": ", what);
  if (n == 0) return;
  const Tensor gathered = gather_grad(local.grad(), n, group);
  const Tensor want = serial_in.grad().to(DType::f32).contiguous().reshape({n, c.vocab});
  check_grad(gathered, want, c.vocab, grad_tolerance(c.dtype), what);
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (int64_t vocab : {37, 3, 64})
    for (int64_t multiple : {1, 8})
      for (double smoothing : {0.0, 0.1})
        for (const char* reduction : {"mean", "sum", "none"})
          for (const Shape& batch : {Shape{12}, Shape{3, 5}})
            for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
              Case c;
              c.vocab = vocab;
              c.multiple = multiple;
              c.batch = batch;
              c.dtype = dtype;
              c.opts.label_smoothing = smoothing;
              c.opts.reduction = reduction;
              cases.push_back(c);
            }
  // An ignore_index that is a real id; every target ignored (mean: NaN, as cross_entropy); no rows.
  Case real_id;
  real_id.opts.ignore_index = 2;
  real_id.opts.label_smoothing = 0.1;
  cases.push_back(real_id);
  for (const char* reduction : {"mean", "sum"}) {
    Case ignored;
    ignored.all_ignored = true;
    ignored.opts.reduction = reduction;
    cases.push_back(ignored);
  }
  Case empty_rows;
  empty_rows.batch = {0, 4};
  cases.push_back(empty_rows);
  return cases;
}

// The backward node tolerates a missing gradient (undefined: none; zeros, as the engine hands an
// always_run node: zero gradient) without communicating.
void check_missing_gradient(const CommPtr& group) {
  const VocabShard shard = tensor::vocab_shard(37, group->rank(), group->size());
  Case c;
  Tensor local = padded_logits(c, shard.padded_vocab_size, 7)
                     .narrow(1, shard.start, shard.local)
                     .clone()
                     .set_requires_grad(true);
  Tensor loss = tensor::vocab_parallel_cross_entropy(local, make_targets(c, 7), shard,
                                                     {.reduction = "none"}, group);
  std::shared_ptr<autograd::Node> node = loss.grad_fn();
  while (node && node->name() != "VocabParallelCrossEntropyBackward")
    node = node->next_edges.empty() ? nullptr : node->next_edges[0].fn;
  RANK_CHECK(node != nullptr && node->always_run(), "the loss's backward node");
  group->reset_stats();
  std::vector<Tensor> none = node->apply({Tensor()});
  RANK_CHECK(none.size() == 1 && !none[0].defined(), "undefined gradient in, undefined out");
  std::vector<Tensor> zero = node->apply({zeros({12})});
  RANK_CHECK(zero.size() == 1 && zero[0].shape() == local.shape(), "zero gradient in");
  for (int64_t i = 0; i < zero[0].numel(); ++i)
    RANK_CHECK(testing::element(zero[0], i) == 0.0, "zero gradient out at ", i);
  RANK_CHECK(group->stats().total().calls == 0, "no communication in the backward");
}

// Mistakes fail with a message on every rank alike, before any collective (no rank left waiting).
void check_errors(const CommPtr& group) {
  const int r = group->rank(), p = group->size();
  const VocabShard shard = tensor::vocab_shard(37, r, p);
  Case c;
  const Tensor local =
      padded_logits(c, shard.padded_vocab_size, 3).narrow(1, shard.start, shard.local);
  auto message = [&](const VocabShard& s, const Tensor& logits, const Tensor& targets) {
    try {
      tensor::vocab_parallel_cross_entropy(logits, targets, s, {}, group);
    } catch (const ValueError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  if (p > 1) {
    const std::string wrong_rank =
        message(tensor::vocab_shard(37, (r + 1) % p, p), local, make_targets(c, 3));
    RANK_CHECK(wrong_rank.find("expected the shard of rank") != std::string::npos, wrong_rank);
  }
  // A padding id is not a class.
  Tensor padding_target = make_targets(c, 3);
  padding_target.data<int64_t>()[4] = 37;
  const std::string bad_target = message(shard, local, padding_target);
  RANK_CHECK(bad_target.find("expected targets in [0, 37)") != std::string::npos, bad_target);
  const std::string bad_width =
      message(shard, local.narrow(1, 0, shard.local - 1), make_targets(c, 3));
  RANK_CHECK(bad_width.find("shard's width") != std::string::npos, bad_width);
  group->barrier()->wait();
}

}  // namespace

int main(int argc, char** argv) {
  return run_distributed(argc, argv, [](const CommPtr& world) {
    // The world; on 4 ranks also two groups of 2 (shards follow the group's rank, not the
    // world's); and every rank alone, a group of one (cross_entropy itself).
    std::vector<CommPtr> groups = {world};
    if (world->size() == 4)
      groups.push_back(world->split(world->rank() / 2, world->rank(), "tensor"));
    groups.push_back(world->split(world->rank(), 0, "alone"));
    const std::vector<Case> cases = all_cases();
    int64_t ran = 0;
    for (const CommPtr& group : groups) {
      uint64_t seed = 1;
      for (const Case& c : cases) {
        check_case(c, group, seed++);
        ++ran;
      }
      // One rank is cross_entropy itself, whose node is not this one.
      if (group->size() > 1) check_missing_gradient(group);
      check_errors(group);
    }
    world->barrier()->wait();
    if (world->rank() == 0) {
      std::printf(
          "vocab_cross_entropy: all checks passed on %d ranks (%lld cases, %lld checks on "
          "rank 0)\n",
          world->size(), static_cast<long long>(ran),
          static_cast<long long>(testing::checks_passed()));
    }
    return 0;
  });
}

// Vocab-parallel cross-entropy. Per row, the loss needs the global max m, the global sum of
// exp(x - m), the target's logit and (for label smoothing) the sum of the logits over the true
// vocabulary: each rank computes them over its real columns and one all-reduce (max) plus one
// all-reduce (sum) make them global. The combination follows the serial CPU kernel
// (kernels/cpu/cross_entropy.cc) term for term, so both agree to rounding. The backward is local:
// softmax minus the smoothed one-hot on this rank's slice. The (N, V_local) work is done with
// device-generic ops, so the same code serves CPU and CUDA logits.
#include "parallel/tensor/vocab_cross_entropy.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "kernels/kernels.h"

namespace tessera::parallel::tensor {
namespace {

using autograd::make_node;
using autograd::Node;
using autograd::SavedTensor;
using autograd::set_history;

constexpr const char* kOp = "vocab_parallel_cross_entropy";

// Where each row's target sits relative to this rank's slice, on the logits' device.
struct RowTargets {
  Tensor index;         // (N, 1) i64: target - start where this rank owns the target, else 0
  Tensor not_owned;     // (N) bool: the target is not a real id of this slice (or is ignored)
  Tensor ignored;       // (N) bool: target == ignore_index
  int64_t counted = 0;  // rows whose target is not ignored
};

// Checks every target (N, i64) is in [0, vocab_size) or ignore_index, before any collective: the
// targets are the same on every rank, so every rank throws alike instead of leaving peers waiting.
RowTargets row_targets(const Tensor& targets, const VocabShard& shard, int64_t ignore_index,
                       Device device) {
  const Tensor host = targets.to(kCPU).contiguous();
  const int64_t n = host.numel(), valid = shard.valid();
  const int64_t* t = host.data<int64_t>();
  std::vector<int64_t> index(size_t(n), 0);
  std::vector<bool> not_owned(size_t(n), true), ignored(size_t(n), false);
  RowTargets rows;
  for (int64_t i = 0; i < n; ++i) {
    if (t[i] == ignore_index) {
      ignored[size_t(i)] = true;
      continue;
    }
    TS_CHECK(t[i] >= 0 && t[i] < shard.vocab_size, kOp, "expected targets in [0, ",
             shard.vocab_size, ") or ignore_index ", ignore_index, ", got target ", t[i],
             " at flat index ", i, " (V = ", shard.vocab_size, ")");
    ++rows.counted;
    const int64_t local = t[i] - shard.start;
    if (local >= 0 && local < valid) {
      index[size_t(i)] = local;
      not_owned[size_t(i)] = false;
    }
  }
  rows.index = from_vector(index, {n, 1}, device);
  rows.not_owned = from_vector(not_owned, {n}, device);
  rows.ignored = from_vector(ignored, {n}, device);
  return rows;
}

// t reduced in place over the group. Staged through the group's device when t lives elsewhere
// (CUDA logits with a host MPI group): these are per-row statistics, cheap next to the logits.
void all_reduce_rows(const Tensor& t, ReduceOp op, Communicator& group) {
  if (t.device() == group.device()) {
    group.all_reduce(t, op)->wait();
    return;
  }
  Tensor staged = t.to(group.device()).contiguous();
  group.all_reduce(staged, op)->wait();
  t.copy_(staged);
}

// This rank's real (unpadded) columns of the (N, V_local) logits, as f32.
Tensor real_columns_f32(const Tensor& logits2, int64_t valid) {
  return logits2.narrow(1, 0, valid).to(DType::f32);  // (N, valid)
}

struct VocabParallelCrossEntropyBackward final : Node {
  SavedTensor logits;  // (N, V_local), this rank's slice
  Tensor lse;          // (N) f32: log-sum-exp over the whole true vocabulary
  RowTargets rows;
  Shape logits_shape;  // the caller's shape, (N, V_local) or (B, T, V_local)
  int64_t valid = 0;   // real columns of the slice
  int64_t vocab_size = 0;
  double label_smoothing = 0.0;

  std::string name() const override { return "VocabParallelCrossEntropyBackward"; }
  // The backward needs no communication, but running on every rank keeps the gradients below it
  // (and the grad-ready hooks of the head's weights) alike across the group when a rank got none.
  bool always_run() const override { return true; }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    autograd::NoGradGuard no_grad;
    const Tensor lv = logits.unpack(kOp);                                      // (N, V_local)
    const Tensor g = masked_fill(grads[0].to(DType::f32), rows.ignored, 0.0);  // (N)
    if (valid == 0) return {zeros(logits_shape, {.dtype = lv.dtype(), .device = lv.device()})};
    // d loss / d x_v = (softmax_v - s / V - (1 - s) [v == t]) * g, softmax over all V real ids.
    const Tensor x = real_columns_f32(lv, valid);            // (N, valid)
    // softmax(x) * g in one fresh (N, valid) f32 tensor, exponentiated and scaled in place: the
    // head's backward peak holds the logits and this gradient, no more (the planner counts it).
    Tensor gx = x - lse.unsqueeze(1);
    kernels::unary(kernels::UnaryOp::exp, gx, gx);
    kernels::binary(kernels::BinaryOp::mul, gx, g.unsqueeze(1).expand(gx.shape()), gx);
    const double s = label_smoothing;
    if (s != 0.0) gx = gx - (g * (s / double(vocab_size))).unsqueeze(1);
    if (s != 1.0) {
      const Tensor hit = masked_fill(g * (s - 1.0), rows.not_owned, 0.0).unsqueeze(1);  // (N, 1)
      kernels::scatter_add(hit, 1, rows.index, gx);
    }
    if (valid == lv.size(1)) return {gx.to(lv.dtype()).view(logits_shape)};
    Tensor full_gx = zeros(lv.shape(), {.dtype = lv.dtype(), .device = lv.device()});  // padding: 0
    full_gx.narrow(1, 0, valid).copy_(gx);
    return {full_gx.view(logits_shape)};
  }

  void release_saved() override {
    logits.reset();
    lse = Tensor();
    rows = RowTargets();
  }
};

void check_inputs(const Tensor& logits, const Tensor& targets, const VocabShard& shard,
                  const CrossEntropyOptions& opts) {
  TS_CHECK(logits.defined() && targets.defined(), kOp, "expected defined logits and targets");
  TS_CHECK(is_floating(logits.dtype()), kOp, "expected floating logits (f32, f16, bf16), got ",
           logits.describe());
  TS_CHECK(targets.dtype() == DType::i64 || targets.dtype() == DType::i32, kOp,
           "expected i64 or i32 targets, got ", targets.describe());
  TS_CHECK((logits.dim() == 2 || logits.dim() == 3) && targets.dim() == logits.dim() - 1 &&
               Shape(logits.shape().begin(), logits.shape().end() - 1) == targets.shape(),
           kOp,
           "expected logits (N, V_local) with targets (N), or (B, T, V_local) with (B, T), got ",
           shape_str(logits.shape()), " and ", shape_str(targets.shape()));
  TS_CHECK(logits.device() == targets.device(), kOp,
           "expected logits and targets on one device, got ", logits.describe(), " and ",
           targets.describe());
  TS_CHECK(opts.reduction == "mean" || opts.reduction == "sum" || opts.reduction == "none", kOp,
           "expected reduction \"mean\", \"sum\" or \"none\", got \"", opts.reduction, "\"");
  TS_CHECK(opts.label_smoothing >= 0.0 && opts.label_smoothing <= 1.0, kOp,
           "expected label_smoothing in [0, 1], got ", opts.label_smoothing);
  TS_CHECK(shard.vocab_size > 0 && shard.vocab_size <= shard.padded_vocab_size, kOp,
           "expected 0 < vocab_size <= padded_vocab_size, got ", shard.vocab_size, " and ",
           shard.padded_vocab_size);
  TS_CHECK(logits.size(-1) == shard.local, kOp, "expected the last dim of the logits to be the ",
           "shard's width ", shard.local, ", got logits ", shape_str(logits.shape()));
}

}  // namespace

int64_t VocabShard::valid() const { return std::clamp<int64_t>(vocab_size - start, 0, local); }

VocabShard vocab_shard(int64_t vocab_size, int rank, int size, int64_t multiple) {
  TS_CHECK(vocab_size > 0, "vocab_shard", "expected a positive vocabulary size, got ", vocab_size);
  TS_CHECK(size >= 1 && rank >= 0 && rank < size, "vocab_shard",
           "expected 0 <= rank < size, got rank ", rank, " of size ", size);
  TS_CHECK(multiple >= 1, "vocab_shard", "expected a positive multiple, got ", multiple);
  const int64_t unit = int64_t(size) * multiple;
  VocabShard shard;
  shard.vocab_size = vocab_size;
  shard.padded_vocab_size = (vocab_size + unit - 1) / unit * unit;
  shard.local = shard.padded_vocab_size / size;
  shard.start = int64_t(rank) * shard.local;
  return shard;
}

Tensor vocab_parallel_cross_entropy(const Tensor& local_logits, const Tensor& targets,
                                    const VocabShard& shard, const CrossEntropyOptions& opts,
                                    const std::shared_ptr<Communicator>& group) {
  check_inputs(local_logits, targets, shard, opts);
  if (!group || group->size() == 1) {
    TS_CHECK(
        shard.start == 0 && shard.local >= shard.vocab_size, kOp,
        "expected one shard holding the whole vocabulary (start 0, local >= ", shard.vocab_size,
        ") without a group of several ranks, got start ", shard.start, " and local ", shard.local);
    return cross_entropy(narrow(local_logits, local_logits.dim() - 1, 0, shard.vocab_size), targets,
                         opts);
  }
  TS_CHECK(shard.padded_vocab_size == shard.local * group->size() &&
               shard.start == shard.local * group->rank(),
           kOp, "expected the shard of rank ", group->rank(), " of ", group->size(), " in group ",
           group->name(), " (start ", shard.local * group->rank(), ", padded vocabulary ",
           shard.local * group->size(), "), got start ", shard.start, " and padded vocabulary ",
           shard.padded_vocab_size, " (local ", shard.local, "); see vocab_shard");

  const int64_t n = targets.numel(), vl = shard.local, valid = shard.valid();
  const Device device = local_logits.device();
  const Tensor tgt =
      (targets.dtype() == DType::i64 ? targets : targets.to(DType::i64)).reshape({n});
  RowTargets rows = row_targets(tgt, shard, opts.ignore_index, device);
  const Tensor logits2 = local_logits.reshape({n, vl});  // (N, V_local)
  const double s = opts.label_smoothing;

  Tensor losses, lse;  // (N) f32
  {
    autograd::NoGradGuard no_grad;
    losses = zeros({n}, {.dtype = DType::f32, .device = device});
    lse = zeros({n}, {.dtype = DType::f32, .device = device});
    // Every rank holds the same N, so every rank skips the collectives alike.
    if (n > 0) {
      const Tensor x = valid > 0 ? real_columns_f32(logits2, valid) : Tensor();  // (N, valid)
      Tensor m = valid > 0 ? amax(x, {1}).contiguous()
                           : full({n}, -std::numeric_limits<double>::infinity(),
                                  {.dtype = DType::f32, .device = device});  // (N)
      all_reduce_rows(m, ReduceOp::max, *group);
      // Rows: sum of exp(x - m), the target's logit (from its owner, 0 elsewhere), sum of logits.
      Tensor stats = zeros({s != 0.0 ? 3 : 2, n}, {.dtype = DType::f32, .device = device});
      if (valid > 0) {
        Tensor shifted = x - m.unsqueeze(1);  // (N, valid), exponentiated in place: one temporary
        kernels::unary(kernels::UnaryOp::exp, shifted, shifted);
        stats.select(0, 0).copy_(sum(shifted, {1}));
        stats.select(0, 1).copy_(
            masked_fill(gather(x, 1, rows.index).squeeze(1), rows.not_owned, 0.0));
        if (s != 0.0) stats.select(0, 2).copy_(sum(x, {1}));
      }
      all_reduce_rows(stats, ReduceOp::sum, *group);
      const Tensor log_s = log(stats.select(0, 0));
      // Differences to the max first, as the serial kernel: lse - x_t loses digits when |m| is
      // large.
      Tensor loss = (m - stats.select(0, 1)) + log_s;
      // -mean_v log p_v over the true vocabulary = lse - mean_v x_v
      if (s != 0.0)
        loss = loss * (1.0 - s) + ((m - stats.select(0, 2) / double(shard.vocab_size)) + log_s) * s;
      losses = masked_fill(loss, rows.ignored, 0.0);
      lse = m + log_s;
    }
  }
  if (auto node = make_node<VocabParallelCrossEntropyBackward>({&local_logits})) {
    node->logits = SavedTensor(logits2);
    node->lse = lse;
    node->rows = rows;
    node->logits_shape = local_logits.shape();
    node->valid = valid;
    node->vocab_size = shard.vocab_size;
    node->label_smoothing = s;
    set_history(losses, node);
    node->record_output(losses);
  }

  if (opts.reduction == "none") return reshape(losses, targets.shape());
  Tensor total = sum(losses);
  if (opts.reduction == "sum") return total;
  // Mean over the targets that count; all ignored gives 0 / 0 = NaN, as cross_entropy does.
  return div(total, double(rows.counted));
}

}  // namespace tessera::parallel::tensor

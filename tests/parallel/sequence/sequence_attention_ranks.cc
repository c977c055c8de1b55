// Multi-rank program run by sequence_test.sh under mpirun: every sequence-parallel attention mode
// (ring, all_to_all, ring_flash) in both layouts against the serial scaled_dot_product_attention on
// the gathered full tensors: output, dq, dk, dv (and ring_flash's lse against the kernel's), causal
// and bidirectional, with a key padding mask (fully masked rows included) and with dropout, on the
// world and (on 4 ranks) on interleaved sub-groups; the generator advanced as the serial op does;
// the bytes each mode moves against its formula; a rank whose output feeds no loss (the backward
// still runs there); the per-rank work under a causal mask (zigzag balanced within 5%); the
// heads-not-divisible error of all_to_all. Every rank draws the same full tensors from one seed.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/factory.h"
#include "kernels/kernels.h"
#include "parallel/comm/mpi_runtime.h"
#include "parallel/sequence/attention.h"
#include "parallel/sequence/ring_plan.h"
#include "tests/parallel/rank_check.h"

using namespace tessera;
using namespace tessera::parallel;
using namespace tessera::parallel::sequence;
using tessera::parallel::testing::element;

namespace {

constexpr int64_t kB = 2, kH = 4, kD = 8;
constexpr int64_t kT = 24;  // splits into 2 S zigzag chunks for S = 2 and 4
constexpr uint64_t kDropoutSeed = 4242;
constexpr double kTol = 1e-5;  // relative, f32

Tensor smooth(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  return randn(shape, {}, &gen);
}

Tensor leaf(const Tensor& t) {
  Tensor l = t.detach().clone();
  l.set_requires_grad(true);
  return l;
}

// |got - want| <= tol * (|want| + max |want|) element-wise: relative, with the tensor's largest
// value as the floor for elements near zero. -inf must match exactly; the message names the worst.
void check_close(const Tensor& got, const Tensor& want, const std::string& what) {
  RANK_CHECK(got.defined(), what, ": got an undefined tensor");
  RANK_CHECK(got.shape() == want.shape(), what, ": shape ", shape_str(got.shape()), ", want ",
             shape_str(want.shape()));
  const Tensor g = got.to(DType::f32).contiguous(), w = want.to(DType::f32).contiguous();
  double mag = 0.0;
  for (int64_t i = 0; i < w.numel(); ++i) {
    if (std::isfinite(element(w, i))) mag = std::max(mag, std::fabs(element(w, i)));
  }
  int64_t bad = 0, worst = -1;
  double worst_err = 0.0;
  for (int64_t i = 0; i < g.numel(); ++i) {
    const double a = element(g, i), b = element(w, i);
    const bool ok = std::isinf(b) ? a == b : std::fabs(a - b) <= kTol * (std::fabs(b) + mag);
    if (!ok) {
      ++bad;
      const double err = std::isinf(b) ? INFINITY : std::fabs(a - b);
      if (worst < 0 || err > worst_err) worst = i, worst_err = err;
    }
  }
  RANK_CHECK(bad == 0, what, ": ", bad, " of ", g.numel(), " elements differ, worst at flat ",
             worst, ": got ", worst < 0 ? 0.0 : element(g, worst), ", want ",
             worst < 0 ? 0.0 : element(w, worst));
}

// Batch 0: every third key hidden; batch 1: keys 0 and 1 hidden too, so under a causal mask its
// first two queries see no key (zeros, lse -inf).
Tensor padding_mask() {
  std::vector<float> m(size_t(kB * kT));
  for (int64_t t = 0; t < kT; ++t) {
    m[size_t(t)] = t % 3 != 2;
    m[size_t(kT + t)] = t >= 2 && t % 3 != 1;
  }
  return from_vector(m, {kB, kT}).to(DType::b8);
}

// Passes no gradient to its input, as a head that does not use a tensor would.
struct DropGradNode final : autograd::Node {
  std::string name() const override { return "DropGradNode"; }
  std::vector<Tensor> apply(std::vector<Tensor>&&) override { return {Tensor()}; }
};
Tensor drop_grad(const Tensor& x) {
  Tensor out = x.detach().clone();
  if (auto node = autograd::make_node<DropGradNode>({&x})) autograd::set_history(out, node);
  return out;
}

struct Case {
  SequenceAttentionMode mode;
  SequenceLayout layout;
  bool causal;
  bool mask;
  double dropout;
  bool feed_all = true;  // false: odd ranks' outputs feed no loss
};

std::string case_name(const Case& c, const Communicator& group) {
  return str_cat(mode_name(c.mode), " ", layout_name(c.layout), c.causal ? " causal" : " full",
                 c.mask ? " masked" : "", c.dropout > 0 ? " dropout" : "",
                 c.feed_all ? "" : " partial-loss", " on '", group.name(), "' (", group.size(),
                 " ranks)");
}

// The serial results on the full tensors.
struct Serial {
  Tensor out, lse, dq, dk, dv;
  uint64_t gen_offset = 0;
};

Serial serial(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& w, const Case& c,
              const Tensor& mask) {
  Generator gen(kDropoutSeed);
  gen.reserve(17);  // a generator already in use
  Tensor ql = leaf(q), kl = leaf(k), vl = leaf(v);
  AttentionArgs a{
      .key_padding_mask = mask, .causal = c.causal, .dropout_p = c.dropout, .gen = &gen};
  Tensor out = scaled_dot_product_attention(ql, kl, vl, a);
  autograd::backward({sum(mul(out, w))});
  Serial s{out.detach(), Tensor(), ql.grad(), kl.grad(), vl.grad(), gen.offset()};
  // The serial lse from the kernel itself, with the dropout counters the op used.
  kernels::AttentionOptions o{.causal = c.causal};
  if (c.dropout > 0)
    o = {.causal = c.causal, .dropout_p = float(c.dropout), .seed = kDropoutSeed, .offset = 17};
  Tensor out2 = empty(q.shape()), lse = empty({kB, kH, kT});
  kernels::attention_forward(q, k, v, mask, o, out2, lse);
  s.lse = lse;
  return s;
}

// Bytes this rank sent and received over `group` in one forward + backward, by the formulas of
// parallel/sequence/attention.h.
void check_bytes(const CommStats& s, const Case& c, int p, const std::string& what) {
  const int64_t n = kB * kH * (kT / p) * kD, e = 4;
  int64_t send_calls = 0, send_bytes = 0, a2a_calls = 0, a2a_sent = 0;
  if (c.mode == SequenceAttentionMode::all_to_all) {
    a2a_calls = 8;
    a2a_sent = 8 * ((p - 1) * n * e / p);
  } else {
    send_calls = 2 * (p - 1) + 2 * (p - 1) + 2 * p;
    send_bytes = 2 * (p - 1) * n * e + 2 * (p - 1) * n * e + 2 * p * n * 4;
  }
  const CommCounter& sent = s[CommKind::send];
  const CommCounter& received = s[CommKind::recv];
  const CommCounter& a2a = s[CommKind::all_to_all];
  RANK_CHECK(sent.calls == send_calls && sent.bytes_sent == send_bytes, what, ": sends ",
             sent.calls, " moving ", sent.bytes_sent, " bytes, want ", send_calls, " moving ",
             send_bytes);
  RANK_CHECK(received.calls == send_calls && received.bytes_received == send_bytes, what,
             ": recvs ", received.calls, " moving ", received.bytes_received, " bytes, want ",
             send_bytes);
  RANK_CHECK(a2a.calls == a2a_calls && a2a.bytes_sent == a2a_sent && a2a.bytes_received == a2a_sent,
             what, ": all_to_all ", a2a.calls, " calls sending ", a2a.bytes_sent, ", want ",
             a2a_calls, " sending ", a2a_sent);
  const CommCounter total = s.total();
  RANK_CHECK(total.calls == sent.calls + received.calls + a2a.calls, what,
             ": unexpected collectives: ", s.str());
}

void run_case(const std::shared_ptr<Communicator>& group, const Case& c, uint64_t seed,
              bool print_bytes) {
  const std::string what = case_name(c, *group);
  const int p = group->size(), r = group->rank();
  const Tensor q = smooth({kB, kH, kT, kD}, seed), k = smooth({kB, kH, kT, kD}, seed + 1);
  const Tensor v = smooth({kB, kH, kT, kD}, seed + 2);
  Tensor w = smooth({kB, kH, kT, kD}, seed + 3);
  const Tensor mask = c.mask ? padding_mask() : Tensor();
  if (!c.feed_all) {  // the serial loss only sees the outputs of even ranks
    for (int rank = 1; rank < p; rank += 2) {
      for (const Segment& s : rank_segments(c.layout, kT, p, rank))
        w.narrow(2, s.global, s.length).zero_();
    }
  }
  const Serial want = serial(q, k, v, w, c, mask);
  const auto shard = [&](const Tensor& full) { return shard_sequence(full, 2, c.layout, p, r); };

  Generator gen(kDropoutSeed);
  gen.reserve(17);
  Tensor ql = leaf(shard(q)), kl = leaf(shard(k)), vl = leaf(shard(v));
  SequenceAttentionArgs args{.mode = c.mode,
                             .group = group,
                             .layout = c.layout,
                             .causal = c.causal,
                             .key_padding_mask = mask,
                             .dropout_p = c.dropout,
                             .gen = &gen};
  group->reset_stats();
  Tensor out, lse;
  if (c.mode == SequenceAttentionMode::ring_flash) {
    RingFlashOutput o = ring_flash_attention(ql, kl, vl, args);
    out = o.out;
    lse = o.lse;
  } else {
    out = attention(ql, kl, vl, args);
  }
  Tensor loss = sum(mul(c.feed_all || r % 2 == 0 ? out : drop_grad(out), shard(w)));
  autograd::backward({loss});
  const CommStats stats = group->stats();

  check_close(out, shard(want.out), what + " out");
  if (lse.defined()) check_close(lse, shard_sequence(want.lse, 2, c.layout, p, r), what + " lse");
  check_close(ql.grad(), shard(want.dq), what + " dq");
  check_close(kl.grad(), shard(want.dk), what + " dk");
  check_close(vl.grad(), shard(want.dv), what + " dv");
  RANK_CHECK(gen.offset() == want.gen_offset, what, ": the generator is at ", gen.offset(),
             ", the serial one at ", want.gen_offset);
  check_bytes(stats, c, p, what);
  if (print_bytes && r == 0) {
    std::printf(
        "bytes per rank, forward + backward, %s: send %lld, recv %lld, all_to_all sent %lld\n",
        what.c_str(), static_cast<long long>(stats[CommKind::send].bytes_sent),
        static_cast<long long>(stats[CommKind::recv].bytes_received),
        static_cast<long long>(stats[CommKind::all_to_all].bytes_sent));
  }
}

void run_all(const std::shared_ptr<Communicator>& group, uint64_t seed, bool full_matrix) {
  const SequenceAttentionMode modes[] = {SequenceAttentionMode::ring,
                                         SequenceAttentionMode::all_to_all,
                                         SequenceAttentionMode::ring_flash};
  for (SequenceAttentionMode mode : modes) {
    bool printed = false;
    for (SequenceLayout layout : {SequenceLayout::contiguous, SequenceLayout::zigzag}) {
      for (bool causal : {false, true}) {
        for (bool mask : {false, true}) {
          for (double dropout : {0.0, 0.2}) {
            if (!full_matrix && (mask != causal || dropout > 0)) continue;
            run_case(group, {mode, layout, causal, mask, dropout}, seed, full_matrix && !printed);
            printed = true;
            seed += 10;
          }
        }
      }
    }
    run_case(group, {mode, SequenceLayout::zigzag, true, true, 0.2, /*feed_all=*/false}, seed += 10,
             false);
  }
}

// Under a causal mask, ring_flash's zigzag layout scores the same number of (query, key) pairs on
// every rank (within 5%); the contiguous layout does not. Counted by the forward itself.
void check_balance(const std::shared_ptr<Communicator>& group) {
  const int p = group->size();
  for (SequenceLayout layout : {SequenceLayout::zigzag, SequenceLayout::contiguous}) {
    SequenceAttentionStats stats;
    const auto shard = [&](uint64_t seed) {
      return shard_sequence(smooth({kB, kH, kT, kD}, seed), 2, layout, p, group->rank());
    };
    SequenceAttentionArgs args{.mode = SequenceAttentionMode::ring_flash,
                               .group = group,
                               .layout = layout,
                               .causal = true,
                               .stats = &stats};
    ring_flash_attention(shard(1), shard(2), shard(3), args);
    RANK_CHECK(
        stats.score_elements == kB * kH * ring_score_elements(layout, kT, p, group->rank(), true),
        layout_name(layout), ": the forward scored ", stats.score_elements, " pairs, the plan ",
        kB * kH * ring_score_elements(layout, kT, p, group->rank(), true));
    Tensor mine = from_vector(std::vector<int64_t>{stats.score_elements}, {1});
    Tensor all = empty({p}, {.dtype = DType::i64});
    group->all_gather(mine, all)->wait();
    const int64_t* n = all.data<int64_t>();
    const int64_t lo = *std::min_element(n, n + p), hi = *std::max_element(n, n + p);
    if (layout == SequenceLayout::zigzag) {
      RANK_CHECK(double(hi) <= 1.05 * double(lo), "zigzag causal work per rank from ", lo, " to ",
                 hi, " score elements");
    } else {
      RANK_CHECK(hi > lo, "contiguous causal work is expected to be unbalanced, got ", lo, " to ",
                 hi);
    }
    if (group->rank() == 0) {
      std::string per_rank;
      for (int i = 0; i < p; ++i) per_rank += str_cat(i ? ", " : "", n[i]);
      std::printf("ring_flash causal score elements per rank, %s on %d ranks: %s (max/min %.3f)\n",
                  layout_name(layout), p, per_rank.c_str(), double(hi) / double(lo));
    }
  }
}

void check_heads_error(const std::shared_ptr<Communicator>& group) {
  const int p = group->size();
  const int64_t heads = p + 1;
  const Tensor x = smooth({1, heads, 4, kD}, 9);
  SequenceAttentionArgs args{.mode = SequenceAttentionMode::all_to_all, .group = group};
  std::string message;
  try {
    attention(x, x, x, args);
  } catch (const ValueError& e) {
    message = e.what();
  }
  const std::string want = str_cat("got H = ", heads, " heads and S = ", p, " ranks");
  RANK_CHECK(message.find(want) != std::string::npos, "all_to_all with ", heads, " heads on ", p,
             " ranks: expected an error containing '", want, "', got '", message, "'");
}

}  // namespace

int main(int argc, char** argv) {
  return run_distributed(argc, argv, [](const std::shared_ptr<Communicator>& world) {
    run_all(world, 1000, true);
    check_balance(world);
    check_heads_error(world);
    if (world->size() == 4) {
      // Two groups of two, interleaved (ranks 0, 2 and 1, 3): the modes must use the group's rank.
      auto half = world->split(world->rank() % 2, world->rank(), "half");
      run_all(half, 5000, false);
    }
    world->barrier()->wait();
    if (world->rank() == 0) {
      std::printf("sequence_attention: all checks passed on %d ranks (%lld checks on rank 0)\n",
                  world->size(), static_cast<long long>(parallel::testing::checks_passed()));
    }
    return 0;
  });
}

// Single-process tests of parallel/sequence: the contiguous and zigzag layouts (segments, order,
// permutations and their gradients), the ring's block plan (skips, causal diagonals, balance), and
// every attention mode on a ring of one rank against scaled_dot_product_attention.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>
#include <vector>

#include "autograd/ops.h"
#include "core/factory.h"
#include "parallel/sequence/attention.h"
#include "parallel/sequence/layout.h"
#include "parallel/sequence/ring_plan.h"

namespace {

using namespace tessera;
using namespace tessera::parallel::sequence;
// |got - want| <= atol + rtol |want| everywhere (tests/testing's helper needs the whole library).
void require_close(const Tensor& got, const Tensor& want, double rtol, double atol) {
  REQUIRE(got.shape() == want.shape());
  const Tensor g = got.to(DType::f32).contiguous(), w = want.to(DType::f32).contiguous();
  int64_t bad = 0;
  for (int64_t i = 0; i < g.numel(); ++i) {
    const double a = g.data<float>()[i], b = w.data<float>()[i];
    bad += !(std::abs(a - b) <= atol + rtol * std::abs(b));
  }
  CHECK(bad == 0);
}

TEST_CASE("zigzag: rank r holds chunks r and 2S - 1 - r", "[sequence]") {
  // 16 positions over 4 ranks: chunks of 2.
  CHECK(rank_segments(SequenceLayout::zigzag, 16, 4, 0) ==
        std::vector<Segment>{{0, 0, 2}, {14, 2, 2}});
  CHECK(rank_segments(SequenceLayout::zigzag, 16, 4, 3) ==
        std::vector<Segment>{{6, 0, 2}, {8, 2, 2}});
  CHECK(rank_segments(SequenceLayout::contiguous, 16, 4, 2) == std::vector<Segment>{{8, 0, 4}});
  CHECK(layout_order(SequenceLayout::zigzag, 8, 2) == std::vector<int64_t>{0, 1, 6, 7, 2, 3, 4, 5});
  std::vector<int64_t> identity(12);
  std::iota(identity.begin(), identity.end(), 0);
  CHECK(layout_order(SequenceLayout::contiguous, 12, 3) == identity);
  for (int size : {1, 2, 3, 4, 8}) {  // every layout order is a permutation
    std::vector<int64_t> order = layout_order(SequenceLayout::zigzag, 16 * size, size);
    std::sort(order.begin(), order.end());
    std::vector<int64_t> all(size_t(16 * size));
    std::iota(all.begin(), all.end(), 0);
    CHECK(order == all);
  }
}

TEST_CASE("layouts refuse sequences that do not split", "[sequence]") {
  CHECK_THROWS_WITH(check_split("op", SequenceLayout::zigzag, 12, 4),
                    Catch::Contains("12 positions to split into 8 zigzag chunks"));
  CHECK_THROWS_AS(check_split("op", SequenceLayout::contiguous, 10, 4), ValueError);
  CHECK_NOTHROW(check_split("op", SequenceLayout::contiguous, 12, 4));
  CHECK(parse_layout("zigzag") == SequenceLayout::zigzag);
  CHECK_THROWS_AS(parse_layout("zig"), ValueError);
  CHECK(parse_mode("ring_flash") == SequenceAttentionMode::ring_flash);
  CHECK_THROWS_WITH(parse_mode("flash"), Catch::Contains("\"all_to_all\""));
}

TEST_CASE("to_layout and from_layout are inverse permutations with gradients", "[sequence]") {
  Generator gen(3);
  Tensor x = randn({2, 3, 16, 4}, {}, &gen);
  x.set_requires_grad(true);
  const std::vector<int64_t> order = layout_order(SequenceLayout::zigzag, 16, 4);
  Tensor laid = zigzag_permute(x, 2, 4);
  for (int64_t i = 0; i < 16; ++i) {
    require_close(laid.detach().narrow(2, i, 1), x.detach().narrow(2, order[size_t(i)], 1), 0, 0);
  }
  require_close(zigzag_unpermute(laid, 2, 4).detach(), x.detach(), 0, 0);
  // Shards are the laid-out sequence's pieces; gradients land on the original positions.
  for (int r = 0; r < 4; ++r) {
    require_close(shard_sequence(x, 2, SequenceLayout::zigzag, 4, r).detach(),
                  laid.detach().narrow(2, r * 4, 4), 0, 0);
  }
  Tensor w = randn({2, 3, 16, 4}, {}, &gen);
  autograd::backward({sum(mul(laid, w))});
  require_close(x.grad(), zigzag_unpermute(w, 2, 4), 0, 0);
  CHECK(to_layout(x, 2, SequenceLayout::contiguous, 4).is_same(x));
}

TEST_CASE("ring plan: skips above the causal diagonal, causal on it, full below", "[sequence]") {
  // Contiguous, 4 ranks: rank 2 meets rank 1's keys (below), its own (diagonal), rank 3's (above).
  CHECK(ring_blocks(SequenceLayout::contiguous, 16, 4, 2, 1, true).at(0).kind == BlockKind::full);
  CHECK(ring_blocks(SequenceLayout::contiguous, 16, 4, 2, 2, true).at(0).kind == BlockKind::causal);
  CHECK(ring_blocks(SequenceLayout::contiguous, 16, 4, 2, 3, true).empty());
  CHECK(ring_blocks(SequenceLayout::contiguous, 16, 4, 2, 3, false).size() == 1);
  // Zigzag: every other rank gives two full blocks; its own gives two causal and one full.
  for (int size : {2, 4, 8}) {
    const int64_t total = 4 * size, c = 2;  // chunks of 2
    for (int r = 0; r < size; ++r) {
      for (int owner = 0; owner < size; ++owner) {
        const std::vector<AttentionBlock> b =
            ring_blocks(SequenceLayout::zigzag, total, size, r, owner, true);
        const int64_t causal = std::count_if(b.begin(), b.end(), [](const AttentionBlock& x) {
          return x.kind == BlockKind::causal;
        });
        CHECK(b.size() == (owner == r ? 3u : 2u));
        CHECK(causal == (owner == r ? 2 : 0));
      }
      // Balanced: 2 (S - 1) full blocks, one full and two causal ones, on every rank.
      CHECK(ring_score_elements(SequenceLayout::zigzag, total, size, r, true) ==
            (2 * (size - 1) + 1) * c * c + 2 * c * (c + 1) / 2);
      CHECK(ring_score_elements(SequenceLayout::zigzag, total, size, r, false) ==
            total / size * total);
    }
    // Contiguous: rank r scores r full blocks and one causal one.
    const int64_t n = total / size;
    CHECK(ring_score_elements(SequenceLayout::contiguous, total, size, size - 1, true) ==
          (size - 1) * n * n + n * (n + 1) / 2);
  }
}

// On a ring of one rank (no group) every mode is the serial attention, in either layout.
TEST_CASE("every mode on one rank equals scaled_dot_product_attention", "[sequence]") {
  Generator data(11);
  const Tensor q = randn({2, 2, 12, 8}, {}, &data), k = randn({2, 2, 12, 8}, {}, &data);
  const Tensor v = randn({2, 2, 12, 8}, {}, &data), w = randn({2, 2, 12, 8}, {}, &data);
  std::vector<float> m(24, 1.0f);
  m[0] = m[5] = m[12] = m[13] = 0.0f;
  const Tensor mask = from_vector(m, {2, 12}).to(DType::b8);
  for (SequenceAttentionMode mode : {SequenceAttentionMode::ring, SequenceAttentionMode::all_to_all,
                                     SequenceAttentionMode::ring_flash}) {
    for (SequenceLayout layout : {SequenceLayout::contiguous, SequenceLayout::zigzag}) {
      for (bool causal : {false, true}) {
        INFO(mode_name(mode) << " " << layout_name(layout) << " causal " << causal);
        const auto run = [&](bool sequence_parallel, Tensor* grads) {
          Generator gen(5);
          Tensor x[3] = {q.clone(), k.clone(), v.clone()};
          for (Tensor& t : x) t.set_requires_grad(true);
          Tensor out;
          if (sequence_parallel) {
            out = attention(x[0], x[1], x[2],
                            {.mode = mode,
                             .layout = layout,
                             .causal = causal,
                             .key_padding_mask = mask,
                             .dropout_p = 0.25,
                             .gen = &gen});
          } else {
            out = scaled_dot_product_attention(
                x[0], x[1], x[2],
                {.key_padding_mask = mask, .causal = causal, .dropout_p = 0.25, .gen = &gen});
          }
          autograd::backward({sum(mul(out, w))});
          for (int i = 0; i < 3; ++i) grads[i] = x[i].grad();
          CHECK(gen.offset() == uint64_t(2 * 2 * 12 * 12));
          return out.detach();
        };
        Tensor got_grads[3], want_grads[3];
        const Tensor got = run(true, got_grads), want = run(false, want_grads);
        require_close(got, want, 1e-5, 1e-5);
        for (int i = 0; i < 3; ++i) require_close(got_grads[i], want_grads[i], 1e-5, 1e-5);
      }
    }
  }
}

TEST_CASE("sequence attention rejects bad arguments", "[sequence]") {
  const Tensor x = zeros({1, 2, 6, 4});
  CHECK_THROWS_WITH(attention(x, x, zeros({1, 2, 5, 4}), {}), Catch::Contains("of one shape"));
  CHECK_THROWS_WITH(
      attention(x, x, x, {.layout = SequenceLayout::zigzag, .key_padding_mask = zeros({1, 6})}),
      Catch::Contains("key_padding_mask"));
  CHECK_THROWS_WITH(ring_attention(zeros({1, 2, 5, 4}), zeros({1, 2, 5, 4}), zeros({1, 2, 5, 4}),
                                   {.layout = SequenceLayout::zigzag}),
                    Catch::Contains("zigzag"));
  CHECK_THROWS_AS(attention(x, x, x, {.dropout_p = 1.0}), ValueError);
}

}  // namespace

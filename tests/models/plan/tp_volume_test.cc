// Tests for `bench tp`'s arithmetic: scheme layouts and the documentation's factors, the ring
// all-reduce count, which shapes each layout splits, the 1D volume of a block and of a GPT step,
// the 2D and 3D volume of a block and the GPT's edges in every mode, written out by hand.
#include "models/plan/tp_volume.h"

#include <catch2/catch.hpp>
#include <utility>

#include "core/error.h"

using namespace tessera::plan;
using tessera::parallel::TensorMode;

TEST_CASE("scheme layouts and the Colossal-AI factors") {
  CHECK(tp_modes() == std::vector<TensorMode>{TensorMode::one_d, TensorMode::two_d,
                                              TensorMode::two_point_five_d, TensorMode::three_d});
  const SchemeLayout one_d = scheme_layout(TensorMode::one_d, 4);
  CHECK(one_d.fits);
  CHECK(one_d.factor == Approx(1.5));  // 2 (4 - 1) / 4
  CHECK(one_d.layout == "P=4");
  CHECK(scheme_layout(TensorMode::one_d, 1).factor == 0.0);

  const SchemeLayout two_d = scheme_layout(TensorMode::two_d, 4);
  CHECK(two_d.fits);
  CHECK(two_d.q == 2);
  CHECK(two_d.factor == Approx(3.0));  // 6 (2 - 1) / 2
  CHECK_FALSE(scheme_layout(TensorMode::two_d, 2).fits);
  CHECK(scheme_layout(TensorMode::two_d, 2).layout == "2 is not q^2");
  CHECK_FALSE(scheme_layout(TensorMode::two_d, 8).fits);
  CHECK(scheme_layout(TensorMode::two_d, 16).factor == Approx(4.5));  // q = 4

  const SchemeLayout tess = scheme_layout(TensorMode::two_point_five_d, 8);
  CHECK(tess.fits);
  CHECK(tess.q == 2);
  CHECK(tess.depth == 2);
  CHECK(tess.factor == Approx(2.25));                     // 3 (2 - 1)(2 + 1) / (2 x 2)
  CHECK(scheme_layout(TensorMode::two_point_five_d, 4).factor == Approx(3.0));  // d = 1 is 2D
  CHECK_FALSE(scheme_layout(TensorMode::two_point_five_d, 2).fits);
  CHECK(scheme_layout(TensorMode::two_point_five_d, 16).q == 4);  // the largest q: 16 = 1 x 4^2

  const SchemeLayout three_d = scheme_layout(TensorMode::three_d, 8);
  CHECK(three_d.fits);
  CHECK(three_d.factor == Approx(0.75));  // 6 (2 - 1) / 8
  CHECK_FALSE(scheme_layout(TensorMode::three_d, 4).fits);
  CHECK(scheme_layout(TensorMode::three_d, 27).factor == Approx(12.0 / 27));

  CHECK_THROWS_AS(scheme_layout(tessera::parallel::tensor_mode_from_name("4d"), 4),
                  tessera::ValueError);
}

TEST_CASE("ring all-reduce bytes per rank as the communicators count them") {
  CHECK(ring_all_reduce_bytes(4096, 1) == 0);
  CHECK(ring_all_reduce_bytes(4096, 2) == 4096);
  CHECK(ring_all_reduce_bytes(4096, 4) == 6144);
  CHECK(ring_all_reduce_bytes(10, 3) == 13);  // floor(2 x 2 / 3 x 10)
}

TEST_CASE("1D block: 2 all-reduces of B T C forward, 2 backward") {
  const VolumePlan p = plan_1d_block(2, 128, 768, 4);
  const int64_t a = 2 * 128 * 768 * 4;
  CHECK(p.activation_bytes == a);
  CHECK(p.exchanges == 4);
  CHECK(p.forward_calls == 2);
  CHECK(p.backward_calls == 2);
  CHECK(p.payload_bytes == 4 * a);
  CHECK(p.sent_bytes == 4 * a * 3 / 2);
  CHECK(p.extra_payload_bytes == 0);
  CHECK(doc_bytes(scheme_layout(TensorMode::one_d, 4), p) == Approx(double(p.sent_bytes)));
  CHECK(plan_1d_block(2, 128, 768, 1).sent_bytes == 0);
}

TEST_CASE("1D GPT step: embedding, 2 per block each way, the head's input gradient, CE rows") {
  tessera::gpt::GPTConfig c = tessera::gpt::gpt_preset("gpt-mini");  // 4 layers, C 256
  const VolumePlan p = plan_1d_gpt_step(c, 2, 64, 2);
  const int64_t a = 2 * 64 * 256 * 4, rows = 2 * 64 * 4;
  CHECK(p.exchanges == 1 + 8 + 8 + 1);
  CHECK(p.forward_calls == 1 + 8 + 2);
  CHECK(p.backward_calls == 8 + 1);
  CHECK(p.extra_payload_bytes == 3 * rows);
  CHECK(p.payload_bytes == 18 * a + 3 * rows);
  CHECK(p.sent_bytes == p.payload_bytes);  // 2 (P-1) / P = 1 on 2 ranks
  CHECK(p.sent_bytes - doc_bytes(scheme_layout(TensorMode::one_d, 2), p) ==
        Approx(double(p.extra_sent_bytes)));
}

TEST_CASE("layouts refuse the shapes they cannot split, naming the numbers") {
  const TpDims block{.batch = 4, .seq = 128, .d_model = 768, .heads = 12};
  CHECK(layout_misfit(scheme_layout(TensorMode::one_d, 4), block).empty());
  CHECK(layout_misfit(scheme_layout(TensorMode::one_d, 8), block) ==
        "12 heads not divisible by P = 8");
  CHECK(layout_misfit(scheme_layout(TensorMode::two_d, 4), block).empty());
  CHECK(layout_misfit(scheme_layout(TensorMode::two_d, 8), block) == "8 is not q^2");
  CHECK(layout_misfit(scheme_layout(TensorMode::two_point_five_d, 8), block).empty());
  CHECK(layout_misfit(scheme_layout(TensorMode::two_point_five_d, 8),
                      {.batch = 2, .seq = 1, .d_model = 768, .heads = 12}) ==
        "2 sequences not divisible by d q = 4");
  CHECK(layout_misfit(scheme_layout(TensorMode::three_d, 8), block)
            .empty());  // 12 % 4, 768 % 8, 4 % 2
  CHECK(layout_misfit(scheme_layout(TensorMode::three_d, 8),
                      {.batch = 4, .seq = 1, .d_model = 256, .heads = 8, .vocab = 257}) ==
        "257 tokens not divisible by q^2 = 4");
}

// The 2D and 3D blocks written out for q = 2 (the layer formulas of tp_volume.h summed by hand):
// n rows per rank, C features, each Linear's x, w, b bytes.
TEST_CASE("2D block on a 2 x 2 grid: SUMMA broadcasts and reduces, LayerNorm statistics") {
  const int64_t b = 4, t = 8, c = 16, q = 2, n = b / q * t;
  const VolumePlan p = plan_block(scheme_layout(TensorMode::two_d, 4), b, t, c);
  int64_t sent = 0, param = 0;
  for (auto [in, out] : {std::pair<int64_t, int64_t>{c, 3 * c}, {c, c}, {c, 4 * c}, {4 * c, c}}) {
    const int64_t x = n * in / q * 4, w = out / q * in / q * 4, bias = out / q * 4;
    // forward: x, w broadcast (root sends once), bias gathered; backward: x reduced (q - 1),
    // w broadcast, x broadcast, w reduced (q - 1), bias scattered.
    sent += x + w + bias / 2 + x + w + x + w + bias / 2;
    param += w + bias / 2 + w + w + bias / 2;
  }
  for (int ln = 0; ln < 2; ++ln) {
    sent += 2 * (n * 4 + c / q * 4 / 2 + n * 4 + c / q * 4 / 2);  // statistics 2(q-1)/q = 1
    param += 2 * (c / q * 4 / 2 * 2);
  }
  CHECK(p.sent_bytes == sent);
  CHECK(p.param_sent_bytes == param);
  CHECK(p.forward_calls == 4 * (2 + 2 + 1) + 2 * 4);
  CHECK(p.backward_calls == 4 * (4 * 2 + 1) + 2 * 4);
  // 2.5D with depth 2 on 8 ranks: half the rows, plus each parameter's depth all-reduce.
  const VolumePlan tess = plan_block(scheme_layout(TensorMode::two_point_five_d, 8), b, t, c);
  CHECK(tess.backward_calls == p.backward_calls + 4 * 2 + 2 * 2);
}

TEST_CASE("3D block on a 2 x 2 x 2 cube: gathers and scatters of pieces") {
  const int64_t b = 4, t = 8, c = 16, q = 2, n = b / q * t;
  const VolumePlan p = plan_block(scheme_layout(TensorMode::three_d, 8), b, t, c);
  int64_t sent = 0;
  for (auto [in, out] : {std::pair<int64_t, int64_t>{c, 3 * c}, {c, c}, {c, 4 * c}, {4 * c, c}})
    sent += 2 * (n * in / q * 4 + out / q * in / q * 4 + n * out / q * 4 + out / (q * q) * 4) / 2;
  sent += 2 * 2 * (4 * n * 4 + 2 * c / (q * q) * 4 / 2);  // 2 LayerNorms, 2 statistics each
  CHECK(p.sent_bytes == sent);
  CHECK(p.forward_calls == 4 * 4 + 2 * 2 * 3);
  CHECK(p.backward_calls == p.forward_calls);
}

// The GPT's edges for gpt-tiny (V 256, context L 64, C 128, 2 layers) on B = 4 sequences of T = 8,
// every term of tp_volume.h's formulas worked out by hand (bytes, f32). These are the shapes the
// bench's tiny runs measure (tests/tools/cli/bench_cli_test.sh): measured = predicted there.
namespace {
const tessera::gpt::GPTConfig kTiny = tessera::gpt::gpt_preset("gpt-tiny");
constexpr int64_t kB = 4, kT = 8;
}  // namespace

TEST_CASE("GPT edges under 1D: embedding and head all-reduces of A, the loss's row statistics") {
  // P = 4: A = 4 x 8 x 128 x 4 = 16384 bytes, an all-reduce sends 2 x 3/4 of it = 24576; the
  // statistics 32 floats (128 bytes) -> 192 sent, 64 floats (256 bytes) -> 384.
  const VolumePlan e = plan_gpt_edges(scheme_layout(TensorMode::one_d, 4), kTiny, kB, kT);
  CHECK(e.exchanges == 2);
  CHECK(e.forward_calls == 3);
  CHECK(e.backward_calls == 1);
  CHECK(e.payload_bytes == 2 * 16384 + 128 + 256);
  CHECK(e.sent_bytes == 2 * 24576 + 192 + 384);  // 49728
  CHECK(e.extra_sent_bytes == 576);
  // The step is the blocks plus the edges: 2 x 4 x 24576 + 49728 = 246336 (the bench's 1D row).
  CHECK(plan_gpt_step(scheme_layout(TensorMode::one_d, 4), kTiny, kB, kT).sent_bytes == 246336);
}

TEST_CASE("GPT edges on a 2 x 2 grid: lookup rows, position rows, SUMMA head, loss statistics") {
  const VolumePlan e = plan_gpt_edges(scheme_layout(TensorMode::two_d, 4), kTiny, kB, kT);
  // n = B / q x T = 16 rows per rank; V' = 256 (already a multiple of q^2 = 4).
  // token embedding: (B, T, C / q) = 4 x 8 x 64 x 4 = 8192 bytes, reduce-scattered forward and
  //   all-gathered backward over q = 2: 4096 + 4096 sent
  // positions: the T rows used, (T, C / q) = 8 x 64 x 4 = 2048 bytes (not the table's L = 64
  //   rows), gathered and scattered: 1024 + 1024
  // ln_f: per statistic row all-reduces of n floats (64 bytes, sent 64) forward and backward, the
  //   (C / q) = 256-byte parameter gathered and scattered (128 each): 2 x (64 + 128 + 64 + 128)
  //   = 768, of which 512 parameters
  // LM head: w = V'/q x C/q x 4 = 128 x 64 x 4 = 32768, l = n x V'/q x 4 = 16 x 128 x 4 = 8192;
  //   (q + 1) (w + l) = 3 x 40960 = 122880, of which 3 w = 98304 parameters
  // loss: row all-reduces of 64 and 128 bytes (sent 64, 128), 4 bytes over the column: 196
  CHECK(e.sent_bytes == 8192 + 2048 + 768 + 122880 + 196);  // 134084
  CHECK(e.param_sent_bytes == 2048 + 512 + 98304);
  // calls: embedding 1 + 1, positions 1 + 1, ln_f 4 + 4, head 2 q + 4 q, loss 3 + 0
  CHECK(e.forward_calls == 1 + 1 + 4 + 4 + 3);
  CHECK(e.backward_calls == 1 + 1 + 4 + 8);
  // payload: 2 x 8192 + 2 x 2048 + 2 x (64 + 256 + 64 + 256) + 3 q (w + l) + 196
  CHECK(e.payload_bytes == 16384 + 4096 + 1280 + 245760 + 196);
  CHECK(e.uncounted_calls == 0);
  // The step: 2 blocks + the edges, complete (the bench's 2D row: 1493444 sent, 1507780 when the
  // positions gathered the whole table).
  const VolumePlan step = plan_gpt_step(scheme_layout(TensorMode::two_d, 4), kTiny, kB, kT);
  CHECK(step.complete);
  CHECK(step.sent_bytes ==
        2 * plan_block(scheme_layout(TensorMode::two_d, 4), kB, kT, 128).sent_bytes + e.sent_bytes);
  CHECK(step.sent_bytes == 1493444);
  // 2.5D at depth 1 is 2D.
  CHECK(plan_gpt_edges(scheme_layout(TensorMode::two_point_five_d, 4), kTiny, kB, kT).sent_bytes ==
        e.sent_bytes);
  // A vocabulary padded to q^2: V = 255 pads to V' = 256, the same blocks.
  tessera::gpt::GPTConfig odd = kTiny;
  odd.vocab_size = 255;
  CHECK(plan_gpt_edges(scheme_layout(TensorMode::two_d, 4), odd, kB, kT).sent_bytes ==
        e.sent_bytes);
}

TEST_CASE("GPT edges on a 2 x 2 x 2 Tesseract: half the rows, one depth sum of the tied table") {
  const VolumePlan e =
      plan_gpt_edges(scheme_layout(TensorMode::two_point_five_d, 8), kTiny, kB, kT);
  // d = 2, n = B / (d q) x T = 8 rows per rank.
  // token embedding: the layer's (B / d, T, C / q) = 2 x 8 x 64 x 4 = 4096 bytes: 2048 + 2048
  // positions: as 2D, 1024 + 1024
  // ln_f: per statistic 32 + 128 + 32 + 128, and the (C / q^2) = 128-byte parameter gradient
  //   all-reduced over the depth (d = 2: sent 128): 2 x 448 = 896
  // LM head: w = 32768, l = 8 x 128 x 4 = 4096: 3 x (32768 + 4096) = 110592
  // loss: 32 + 64, and 4 bytes over the batch group of d q = 4 ranks: floor(2 x 3/4 x 4) = 6
  // depth: the tied token table's block w once (its lookup and head share one replica), 32768,
  //   and the position rows (T, C / q^2) = 8 x 32 x 4 = 1024 bytes: 32768 + 1024
  CHECK(e.sent_bytes == 4096 + 2048 + 896 + 110592 + 102 + 32768 + 1024);  // 151526
  CHECK(e.backward_calls == 1 + 1 + (4 + 2) + 8 + 2);
  const VolumePlan step =
      plan_gpt_step(scheme_layout(TensorMode::two_point_five_d, 8), kTiny, kB, kT);
  CHECK(step.sent_bytes == 1820902);  // the bench's 2.5D row on 8 ranks (1875174 before)
  // An untied head's weight is a table of its own: its depth sum comes apart, one more w.
  tessera::gpt::GPTConfig untied = kTiny;
  untied.tie_embeddings = false;
  const VolumePlan u =
      plan_gpt_edges(scheme_layout(TensorMode::two_point_five_d, 8), untied, kB, kT);
  CHECK(u.sent_bytes == e.sent_bytes + 32768);
  CHECK(u.backward_calls == e.backward_calls + 1);
}

TEST_CASE("GPT edges on a 2 x 2 x 2 cube: lookup all-to-all, Linear3D head, plane statistics") {
  const VolumePlan e = plan_gpt_edges(scheme_layout(TensorMode::three_d, 8), kTiny, kB, kT);
  // n = B / q x T = 16 rows per rank; B T = 32 ids looked up on every rank.
  // token embedding: the partial rows (B, T, C / q^2) = 32 x 32 x 4 = 4096 bytes, all-to-all
  //   over the weight group (2048 sent), then (B / q, T, C / q), as many bytes, reduce-scattered
  //   over the input group (2048); backward the all-gather and the all-to-all back: 4 x 2048
  //   (an input all-reduce and a weight all-gather of the whole batch sent 16384)
  // positions: the T rows used, (T, C / q^2) = 8 x 32 x 4 = 1024 bytes gathered and scattered:
  //   512 + 512
  // ln_f: per statistic and direction 2 all-reduces of n floats (64 bytes, sent 64) and the
  //   (C / q^2) = 128-byte parameter (64): 2 x 2 x 192 = 768
  // LM head (C 128 -> V 256): x = 16 x 64 x 4 = 4096, w = 128 x 64 x 4 = 32768, y = 16 x 128 x 4
  //   = 8192, half of each each way: 2 x (2048 + 16384 + 4096) = 45056
  // loss: 4 bytes over the weight group: 4
  CHECK(e.sent_bytes == 8192 + 1024 + 768 + 45056 + 4);  // 55044
  CHECK(e.param_sent_bytes == 1024 + 2 * 2 * 64 + 2 * 16384);
  CHECK(e.forward_calls == 2 + 1 + 6 + 3 + 1);
  CHECK(e.backward_calls == 2 + 1 + 6 + 3);
  // The plane's statistics, on q^2 = 4 ranks: 64 and 128 bytes, sent 2 x 3/4 of each = 96 + 192.
  CHECK(e.uncounted_calls == 2);
  CHECK(e.uncounted_payload_bytes == 192);
  CHECK(e.uncounted_sent_bytes == 288);
  const VolumePlan step = plan_gpt_step(scheme_layout(TensorMode::three_d, 8), kTiny, kB, kT);
  CHECK(step.complete);
  CHECK(step.sent_bytes == 584708);  // the bench's 3D row on 8 ranks (600068 before)
  CHECK(step.sent_bytes ==
        2 * plan_block(scheme_layout(TensorMode::three_d, 8), kB, kT, 128).sent_bytes +
            e.sent_bytes);
  CHECK(step.exchanges == plan_1d_gpt_step(kTiny, kB, kT, 8).exchanges);
  // Blocks without biases are not plan_block's: the step says so.
  tessera::gpt::GPTConfig no_bias = kTiny;
  no_bias.bias = false;
  CHECK_FALSE(plan_gpt_step(scheme_layout(TensorMode::three_d, 8), no_bias, kB, kT).complete);
  CHECK(plan_gpt_step(scheme_layout(TensorMode::one_d, 8), no_bias, kB, kT).complete);
  CHECK_THROWS_AS(plan_gpt_edges(scheme_layout(TensorMode::three_d, 4), kTiny, kB, kT),
                  tessera::ValueError);
}

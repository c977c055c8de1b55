// Tests for `bench tp`'s arithmetic: scheme layouts and the documentation's factors, the ring
// all-reduce count, which shapes each layout splits, the 1D volume of a block and of a GPT step and
// the 2D and 3D volume of a block, written out by hand.
#include "tools/bench/tp_plan.h"

#include <catch2/catch.hpp>
#include <utility>

#include "core/error.h"

using namespace tessera::bench;

TEST_CASE("scheme layouts and the Colossal-AI factors") {
  CHECK(tp_modes() == std::vector<std::string>{"1d", "2d", "2.5d", "3d"});
  const SchemeLayout one_d = scheme_layout("1d", 4);
  CHECK(one_d.fits);
  CHECK(one_d.factor == Approx(1.5));  // 2 (4 - 1) / 4
  CHECK(one_d.layout == "P=4");
  CHECK(scheme_layout("1d", 1).factor == 0.0);

  const SchemeLayout two_d = scheme_layout("2d", 4);
  CHECK(two_d.fits);
  CHECK(two_d.q == 2);
  CHECK(two_d.factor == Approx(3.0));  // 6 (2 - 1) / 2
  CHECK_FALSE(scheme_layout("2d", 2).fits);
  CHECK(scheme_layout("2d", 2).layout == "2 is not q^2");
  CHECK_FALSE(scheme_layout("2d", 8).fits);
  CHECK(scheme_layout("2d", 16).factor == Approx(4.5));  // q = 4

  const SchemeLayout tess = scheme_layout("2.5d", 8);
  CHECK(tess.fits);
  CHECK(tess.q == 2);
  CHECK(tess.depth == 2);
  CHECK(tess.factor == Approx(2.25));                     // 3 (2 - 1)(2 + 1) / (2 x 2)
  CHECK(scheme_layout("2.5d", 4).factor == Approx(3.0));  // d = 1 is 2D
  CHECK_FALSE(scheme_layout("2.5d", 2).fits);
  CHECK(scheme_layout("2.5d", 16).q == 4);  // the largest q: 16 = 1 x 4^2

  const SchemeLayout three_d = scheme_layout("3d", 8);
  CHECK(three_d.fits);
  CHECK(three_d.factor == Approx(0.75));  // 6 (2 - 1) / 8
  CHECK_FALSE(scheme_layout("3d", 4).fits);
  CHECK(scheme_layout("3d", 27).factor == Approx(12.0 / 27));

  CHECK_THROWS_AS(scheme_layout("4d", 4), tessera::ValueError);
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
  CHECK(doc_bytes(scheme_layout("1d", 4), p) == Approx(double(p.sent_bytes)));
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
  CHECK(p.sent_bytes - doc_bytes(scheme_layout("1d", 2), p) == Approx(double(p.extra_sent_bytes)));
}

TEST_CASE("layouts refuse the shapes they cannot split, naming the numbers") {
  const TpDims block{.batch = 4, .seq = 128, .d_model = 768, .heads = 12};
  CHECK(layout_misfit(scheme_layout("1d", 4), block).empty());
  CHECK(layout_misfit(scheme_layout("1d", 8), block) == "12 heads not divisible by P = 8");
  CHECK(layout_misfit(scheme_layout("2d", 4), block).empty());
  CHECK(layout_misfit(scheme_layout("2d", 8), block) == "8 is not q^2");
  CHECK(layout_misfit(scheme_layout("2.5d", 8), block).empty());
  CHECK(layout_misfit(scheme_layout("2.5d", 8),
                      {.batch = 2, .seq = 1, .d_model = 768, .heads = 12}) ==
        "2 sequences not divisible by d q = 4");
  CHECK(layout_misfit(scheme_layout("3d", 8), block).empty());  // 12 % 4, 768 % 8, 4 % 2
  CHECK(layout_misfit(scheme_layout("3d", 8),
                      {.batch = 4, .seq = 1, .d_model = 256, .heads = 8, .vocab = 257}) ==
        "257 tokens not divisible by q^2 = 4");
}

// The 2D and 3D blocks written out for q = 2 (the layer formulas of tp_plan.h summed by hand):
// n rows per rank, C features, each Linear's x, w, b bytes.
TEST_CASE("2D block on a 2 x 2 grid: SUMMA broadcasts and reduces, LayerNorm statistics") {
  const int64_t b = 4, t = 8, c = 16, q = 2, n = b / q * t;
  const VolumePlan p = plan_block(scheme_layout("2d", 4), b, t, c);
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
  const VolumePlan tess = plan_block(scheme_layout("2.5d", 8), b, t, c);
  CHECK(tess.backward_calls == p.backward_calls + 4 * 2 + 2 * 2);
}

TEST_CASE("3D block on a 2 x 2 x 2 cube: gathers and scatters of pieces") {
  const int64_t b = 4, t = 8, c = 16, q = 2, n = b / q * t;
  const VolumePlan p = plan_block(scheme_layout("3d", 8), b, t, c);
  int64_t sent = 0;
  for (auto [in, out] : {std::pair<int64_t, int64_t>{c, 3 * c}, {c, c}, {c, 4 * c}, {4 * c, c}})
    sent += 2 * (n * in / q * 4 + out / q * in / q * 4 + n * out / q * 4 + out / (q * q) * 4) / 2;
  sent += 2 * 2 * (4 * n * 4 + 2 * c / (q * q) * 4 / 2);  // 2 LayerNorms, 2 statistics each
  CHECK(p.sent_bytes == sent);
  CHECK(p.forward_calls == 4 * 4 + 2 * 2 * 3);
  CHECK(p.backward_calls == p.forward_calls);
  tessera::gpt::GPTConfig cfg = tessera::gpt::gpt_preset("gpt-mini");
  cfg.d_model = c;
  const VolumePlan step = plan_gpt_step(scheme_layout("3d", 8), cfg, b, t);
  CHECK_FALSE(step.complete);
  CHECK(step.sent_bytes == cfg.n_layers * p.sent_bytes);
  CHECK(step.exchanges == plan_1d_gpt_step(cfg, b, t, 8).exchanges);
}

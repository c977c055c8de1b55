// Tests for `bench tp`'s arithmetic: scheme layouts and the documentation's factors, the ring
// all-reduce count, and the 1D volume of a block and of a GPT step written out by hand.
#include "tools/bench/tp_plan.h"

#include <catch2/catch.hpp>

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

// Tests for `bench zero`'s arithmetic: the ZeRO formulas term by term at N = 1, 2, 4, 8 written out
// by hand from issue 12, and the data-parallel ring volume as the communicators count it.
#include "tools/bench/zero_plan.h"

#include <catch2/catch.hpp>

#include "core/error.h"

using namespace tessera::bench;

TEST_CASE("f32 AdamW: 16 Psi, 8 Psi + 8 Psi / N, 4 Psi + 12 Psi / N, 16 Psi / N") {
  for (int n : {1, 2, 4, 8}) {
    const double d = n;
    CHECK(zero_formula(ZeroPrecision::f32, 0, n).total() == Approx(16.0));
    CHECK(zero_formula(ZeroPrecision::f32, 1, n).total() == Approx(8.0 + 8.0 / d));
    CHECK(zero_formula(ZeroPrecision::f32, 2, n).total() == Approx(4.0 + 12.0 / d));
    CHECK(zero_formula(ZeroPrecision::f32, 3, n).total() == Approx(16.0 / d));
  }
  const StateTerms s1 = zero_formula(ZeroPrecision::f32, 1, 4);
  CHECK(s1.params == 4.0);
  CHECK(s1.grads == 4.0);
  CHECK(s1.states == 2.0);   // m and v, 8 bytes, over 4 ranks
  CHECK(s1.masters == 0.0);  // f32 parameters are their own masters
  const StateTerms s2 = zero_formula(ZeroPrecision::f32, 2, 4);
  CHECK(s2.params == 4.0);
  CHECK(s2.grads == 1.0);
  CHECK(s2.states == 2.0);
}

TEST_CASE("bf16 with f32 masters: (2 + 2 + 12) Psi and its shardings") {
  for (int n : {1, 2, 4, 8}) {
    const double d = n;
    CHECK(zero_formula(ZeroPrecision::bf16, 0, n).total() == Approx(2.0 + 2.0 + 12.0));
    CHECK(zero_formula(ZeroPrecision::bf16, 1, n).total() == Approx(4.0 + 12.0 / d));
    CHECK(zero_formula(ZeroPrecision::bf16, 2, n).total() == Approx(2.0 + 14.0 / d));
    CHECK(zero_formula(ZeroPrecision::bf16, 3, n).total() == Approx(16.0 / d));
  }
  const StateTerms s0 = zero_formula(ZeroPrecision::bf16, 0, 2);
  CHECK(s0.params == 2.0);
  CHECK(s0.grads == 2.0);
  CHECK(s0.states == 8.0);
  CHECK(s0.masters == 4.0);
  const StateTerms s2 = zero_formula(ZeroPrecision::bf16, 2, 2);
  CHECK(s2.grads == 1.0);
  CHECK(s2.states == 4.0);
  CHECK(s2.masters == 2.0);
}

TEST_CASE("formula text and bad arguments") {
  CHECK(zero_formula_text(ZeroPrecision::f32, 0) == "16 Psi");
  CHECK(zero_formula_text(ZeroPrecision::f32, 1) == "8 Psi + 8 Psi / N");
  CHECK(zero_formula_text(ZeroPrecision::f32, 2) == "4 Psi + 12 Psi / N");
  CHECK(zero_formula_text(ZeroPrecision::bf16, 1) == "4 Psi + 12 Psi / N");
  CHECK(zero_formula_text(ZeroPrecision::bf16, 2) == "2 Psi + 14 Psi / N");
  CHECK(zero_formula_text(ZeroPrecision::bf16, 3) == "16 Psi / N");
  CHECK_THROWS_AS(zero_formula(ZeroPrecision::f32, 4, 2), tessera::ValueError);
  CHECK_THROWS_AS(zero_formula(ZeroPrecision::f32, 1, 0), tessera::ValueError);
  CHECK(std::string(zero_precision_name(ZeroPrecision::bf16)) == "bf16");
}

TEST_CASE("data parallelism's ring: 2 (N-1) / N x Psi x itemsize per rank") {
  CHECK(dp_ring_bytes(1000, 4, 1) == 0);
  CHECK(dp_ring_bytes(1000, 4, 2) == 4000);
  CHECK(dp_ring_bytes(1000, 4, 4) == 6000);
  CHECK(dp_ring_bytes(1000, 2, 8) == 3500);
  CHECK(dp_ring_bytes(10, 4, 3) == 53);  // floor(4 / 3 x 40)
}

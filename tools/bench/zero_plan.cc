// `bench zero`'s arithmetic (see zero_plan.h).
#include "tools/bench/zero_plan.h"

#include "core/error.h"

namespace tessera::bench {

const char* zero_precision_name(ZeroPrecision p) {
  return p == ZeroPrecision::f32 ? "f32" : "bf16";
}

StateTerms zero_formula(ZeroPrecision precision, int stage, int ranks) {
  TS_CHECK(stage >= 0 && stage <= 3, "bench zero", "expected a ZeRO stage 0-3, got ", stage);
  TS_CHECK(ranks >= 1, "bench zero", "expected at least one data rank, got ", ranks);
  const bool f32 = precision == ZeroPrecision::f32;
  const double n = double(ranks);
  StateTerms t;
  t.params = f32 ? 4 : 2;
  t.grads = f32 ? 4 : 2;
  t.states = 8;             // Adam's m and v, f32
  t.masters = f32 ? 0 : 4;  // f32 parameters are their own masters
  if (stage >= 1) {
    t.states /= n;
    t.masters /= n;
  }
  if (stage >= 2) t.grads /= n;
  if (stage >= 3) t.params /= n;
  return t;
}

std::string zero_formula_text(ZeroPrecision precision, int stage) {
  const bool f32 = precision == ZeroPrecision::f32;
  switch (stage) {
    case 0:
      return "16 Psi";
    case 1:
      return f32 ? "8 Psi + 8 Psi / N" : "4 Psi + 12 Psi / N";
    case 2:
      return f32 ? "4 Psi + 12 Psi / N" : "2 Psi + 14 Psi / N";
    case 3:
      return "16 Psi / N";
    default:
      throw ValueError("bench zero", str_cat("expected a ZeRO stage 0-3, got ", stage));
  }
}

int64_t dp_ring_bytes(int64_t psi, int64_t itemsize, int ranks) {
  if (ranks <= 1) return 0;
  return 2 * int64_t(ranks - 1) * psi * itemsize / int64_t(ranks);
}

}  // namespace tessera::bench

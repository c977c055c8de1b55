// Scheme layouts, documentation factors and 1D volume predictions (see tp_plan.h).
#include "tools/bench/tp_plan.h"

#include "core/error.h"

namespace tessera::bench {
namespace {

constexpr int64_t kF32 = 4;

// The integer r >= 2 with r^e == n, or 0.
int exact_root(int n, int e) {
  for (int r = 2;; ++r) {
    int64_t v = 1;
    for (int i = 0; i < e; ++i) v *= r;
    if (v == n) return r;
    if (v > n) return 0;
  }
}

// Adds `calls` all-reduces of `numel` f32 elements each to `plan`.
void add_all_reduces(VolumePlan& plan, int64_t calls, int64_t numel, int p, bool activation) {
  const int64_t payload = numel * kF32;
  plan.payload_bytes += calls * payload;
  plan.sent_bytes += calls * ring_all_reduce_bytes(payload, p);
  if (activation) {
    plan.exchanges += calls;
  } else {
    plan.extra_payload_bytes += calls * payload;
    plan.extra_sent_bytes += calls * ring_all_reduce_bytes(payload, p);
  }
}

}  // namespace

const std::vector<std::string>& tp_modes() {
  static const std::vector<std::string> modes{"1d", "2d", "2.5d", "3d"};
  return modes;
}

SchemeLayout scheme_layout(const std::string& mode, int p) {
  TS_CHECK(p >= 1, "bench tp", "expected a positive rank count, got ", p);
  SchemeLayout s;
  s.mode = mode;
  if (mode == "1d") {
    s.fits = true;
    s.q = p;
    s.factor = 2.0 * (p - 1) / p;
    s.layout = str_cat("P=", p);
  } else if (mode == "2d" || mode == "3d") {
    const int e = mode == "2d" ? 2 : 3;
    s.q = exact_root(p, e);
    s.fits = s.q > 0;
    if (s.fits) {
      const double q = s.q;
      s.factor = e == 2 ? 6.0 * (q - 1) / q : 6.0 * (q - 1) / (q * q * q);
      s.layout = str_cat("q=", s.q);
    } else {
      s.layout = str_cat(p, " is not q^", e);
    }
  } else if (mode == "2.5d") {
    for (int q = 2; q * q <= p; ++q)
      if (p % (q * q) == 0) s.q = q;
    s.fits = s.q > 0;
    if (s.fits) {
      s.depth = p / (s.q * s.q);
      const double q = s.q, d = s.depth;
      s.factor = 3.0 * (q - 1) * (d + 1) / (d * q);
      s.layout = str_cat("q=", s.q, " d=", s.depth);
    } else {
      s.layout = str_cat(p, " is not d q^2");
    }
  } else {
    TS_FAIL("bench tp", "expected a mode 1d, 2d, 2.5d or 3d, got '", mode, "'");
  }
  return s;
}

int64_t ring_all_reduce_bytes(int64_t payload, int p) {
  return p <= 1 ? 0 : 2 * payload * (p - 1) / p;
}

VolumePlan plan_1d_block(int64_t batch, int64_t seq, int64_t d_model, int p) {
  VolumePlan plan;
  const int64_t a = batch * seq * d_model;
  plan.activation_bytes = a * kF32;
  if (p <= 1) return plan;  // a serial block moves nothing
  plan.forward_calls = plan.backward_calls = 2;
  add_all_reduces(plan, 4, a, p, /*activation=*/true);
  return plan;
}

VolumePlan plan_1d_gpt_step(const gpt::GPTConfig& config, int64_t batch, int64_t seq, int p) {
  VolumePlan plan;
  const int64_t a = batch * seq * config.d_model, rows = batch * seq, layers = config.n_layers;
  plan.activation_bytes = a * kF32;
  if (p <= 1) return plan;
  // Forward: embedding, 2 per block, then the cross-entropy's max and (sum-exp, target logit).
  plan.forward_calls = 1 + 2 * layers + 2;
  // Backward: 2 per block, the LM head's copy_to_region (its input gradient).
  plan.backward_calls = 2 * layers + 1;
  add_all_reduces(plan, 1 + 2 * layers + 2 * layers + 1, a, p, /*activation=*/true);
  add_all_reduces(plan, 1, rows, p, /*activation=*/false);
  add_all_reduces(plan, 1, 2 * rows, p, /*activation=*/false);
  return plan;
}

double doc_bytes(const SchemeLayout& layout, const VolumePlan& plan) {
  if (!layout.fits) return 0.0;
  return layout.factor * double(plan.exchanges) * double(plan.activation_bytes);
}

}  // namespace tessera::bench

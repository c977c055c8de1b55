// Scheme layouts, documentation factors and 1D volume predictions (see tp_plan.h).
#include "tools/bench/tp_plan.h"

#include <utility>

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

// One collective kind's counts on a section: `calls` calls carrying `payload` bytes in all, `sent`
// bytes sent by this rank.
// `param`: the bytes are parameter blocks or their gradients (their size does not scale with B T).
void add(VolumePlan& plan, bool backward, int64_t calls, int64_t payload, int64_t sent,
         bool param) {
  (backward ? plan.backward_calls : plan.forward_calls) += calls;
  plan.payload_bytes += payload;
  plan.sent_bytes += sent;
  if (param) plan.param_sent_bytes += sent;
}
// SUMMA's q steps over a group of q ranks, each moving one block of `bytes`.
void broadcast_steps(VolumePlan& plan, bool backward, int q, int64_t bytes, bool param) {
  add(plan, backward, q, q * bytes, bytes, param);
}
void reduce_steps(VolumePlan& plan, bool backward, int q, int64_t bytes, bool param) {
  add(plan, backward, q, q * bytes, (q - 1) * bytes, param);
}
// An all-gather (payload: the gathered tensor) or reduce-scatter (the input) on q ranks.
void gather_or_scatter(VolumePlan& plan, bool backward, int q, int64_t payload, bool param) {
  add(plan, backward, 1, payload, (q - 1) * payload / q, param);
}
void all_reduce(VolumePlan& plan, bool backward, int q, int64_t payload, bool param) {
  add(plan, backward, 1, payload, ring_all_reduce_bytes(payload, q), param);
}

constexpr bool kParam = true, kAct = false;

constexpr bool kFwd = false, kBwd = true;

// Linear2D (in -> out, bias) on n rows per rank of a q x q grid, depth d (see tp_plan.h).
void linear_2d(VolumePlan& plan, int q, int d, int64_t n, int64_t in, int64_t out) {
  const int64_t x = n * in / q * kF32, w = out / q * in / q * kF32, b = out / q * kF32;
  broadcast_steps(plan, kFwd, q, x, kAct);
  broadcast_steps(plan, kFwd, q, w, kParam);
  gather_or_scatter(plan, kFwd, q, b, kParam);
  reduce_steps(plan, kBwd, q, x, kAct);  // dX
  broadcast_steps(plan, kBwd, q, w, kParam);
  broadcast_steps(plan, kBwd, q, x, kAct);  // dW
  reduce_steps(plan, kBwd, q, w, kParam);
  gather_or_scatter(plan, kBwd, q, b, kParam);
  if (d > 1) {
    all_reduce(plan, kBwd, d, w, kParam);
    all_reduce(plan, kBwd, d, b / q, kParam);
  }
}

void layer_norm_2d(VolumePlan& plan, int q, int d, int64_t n, int64_t c) {
  for (int i = 0; i < 2; ++i) {  // mean, variance; weight, bias
    all_reduce(plan, kFwd, q, n * kF32, kAct);
    gather_or_scatter(plan, kFwd, q, c / q * kF32, kParam);
    all_reduce(plan, kBwd, q, n * kF32, kAct);
    gather_or_scatter(plan, kBwd, q, c / q * kF32, kParam);
    if (d > 1) all_reduce(plan, kBwd, d, c / q / q * kF32, kParam);
  }
}

// Linear3D (in -> out, bias) on n rows per rank of a q^3 cube.
void linear_3d(VolumePlan& plan, int q, int64_t n, int64_t in, int64_t out) {
  const int64_t x = n * in / q * kF32, w = out / q * in / q * kF32, y = n * out / q * kF32;
  const int64_t b = out / (q * q) * kF32;
  for (bool backward : {kFwd, kBwd}) {
    gather_or_scatter(plan, backward, q, x, kAct);  // forward all-gather, backward dX scatter
    gather_or_scatter(plan, backward, q, y, kAct);  // forward scatter, backward dY all-gather
    gather_or_scatter(plan, backward, q, w, kParam);
    gather_or_scatter(plan, backward, q, b, kParam);
  }
}

void layer_norm_3d(VolumePlan& plan, int q, int64_t n, int64_t c) {
  for (int i = 0; i < 2; ++i) {
    for (bool backward : {kFwd, kBwd}) {
      all_reduce(plan, backward, q, n * kF32, kAct);  // over the input group
      all_reduce(plan, backward, q, n * kF32, kAct);  // over the output group
      gather_or_scatter(plan, backward, q, c / (q * q) * kF32, kParam);
    }
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

std::string layout_misfit(const SchemeLayout& s, const TpDims& dims) {
  if (!s.fits) return s.layout;
  const auto need = [](int64_t value, const char* what, int64_t by,
                       const std::string& by_text) -> std::string {
    return value % by == 0 ? "" : str_cat(value, " ", what, " not divisible by ", by_text);
  };
  const int64_t q = s.q, d = s.depth;
  std::vector<std::string> why;
  if (s.mode == "1d") {
    why = {need(dims.heads, "heads", q, str_cat("P = ", q)),
           need(dims.d_model, "features", q, str_cat("P = ", q))};
  } else if (s.mode == "3d") {
    why = {need(dims.heads, "heads", q * q, str_cat("q^2 = ", q * q)),
           need(dims.d_model, "features", q * q * q, str_cat("q^3 = ", q * q * q)),
           need(dims.batch, "sequences", q, str_cat("q = ", q)),
           need(dims.vocab, "tokens", q * q, str_cat("q^2 = ", q * q))};
  } else {
    why = {need(dims.heads, "heads", q, str_cat("q = ", q)),
           need(dims.d_model, "features", q * q, str_cat("q^2 = ", q * q)),
           need(dims.batch, "sequences", d * q, str_cat("d q = ", d * q))};
  }
  for (const std::string& w : why)
    if (!w.empty()) return w;
  return "";
}

VolumePlan plan_block(const SchemeLayout& s, int64_t batch, int64_t seq, int64_t c) {
  if (s.mode == "1d") return plan_1d_block(batch, seq, c, s.q);
  TS_CHECK(s.fits, "bench tp", "no volume prediction for ", s.mode, " on ", s.layout);
  VolumePlan plan;
  plan.activation_bytes = batch * seq * c * kF32;
  plan.exchanges = 4;  // the 1D count the documentation's formula is priced at
  const int q = s.q;
  const std::vector<std::pair<int64_t, int64_t>> linears{
      {c, 3 * c}, {c, c}, {c, 4 * c}, {4 * c, c}};
  if (s.mode == "3d") {
    const int64_t n = batch / q * seq;
    for (int i = 0; i < 2; ++i) layer_norm_3d(plan, q, n, c);
    for (const auto& [in, out] : linears) linear_3d(plan, q, n, in, out);
  } else {
    const int d = s.depth;
    const int64_t n = batch / (int64_t(d) * q) * seq;
    for (int i = 0; i < 2; ++i) layer_norm_2d(plan, q, d, n, c);
    for (const auto& [in, out] : linears) linear_2d(plan, q, d, n, in, out);
  }
  return plan;
}

VolumePlan plan_gpt_step(const SchemeLayout& s, const gpt::GPTConfig& config, int64_t batch,
                         int64_t seq) {
  if (s.mode == "1d") return plan_1d_gpt_step(config, batch, seq, s.q);
  const VolumePlan block = plan_block(s, batch, seq, config.d_model);
  VolumePlan plan = block;
  const int64_t layers = config.n_layers;
  plan.exchanges = 1 + 4 * layers + 1;
  plan.forward_calls = layers * block.forward_calls;
  plan.backward_calls = layers * block.backward_calls;
  plan.payload_bytes = layers * block.payload_bytes;
  plan.sent_bytes = layers * block.sent_bytes;
  plan.param_sent_bytes = layers * block.param_sent_bytes;
  plan.complete = false;
  return plan;
}

double doc_bytes(const SchemeLayout& layout, const VolumePlan& plan) {
  if (!layout.fits) return 0.0;
  return layout.factor * double(plan.exchanges) * double(plan.activation_bytes);
}

}  // namespace tessera::bench

// Scheme layouts, documentation factors and volume predictions per scheme (see tp_volume.h).
#include "models/plan/tp_volume.h"

#include <utility>

#include "core/error.h"

namespace tessera::plan {
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
// An all-gather (payload: the gathered tensor), reduce-scatter or all-to-all (the input) on q
// ranks.
void gather_or_scatter(VolumePlan& plan, bool backward, int q, int64_t payload, bool param) {
  add(plan, backward, 1, payload, (q - 1) * payload / q, param);
}
void all_reduce(VolumePlan& plan, bool backward, int q, int64_t payload, bool param) {
  add(plan, backward, 1, payload, ring_all_reduce_bytes(payload, q), param);
}

constexpr bool kParam = true, kAct = false;

constexpr bool kFwd = false, kBwd = true;

// Linear2D (in -> out, bias) on n rows per rank of a q x q grid, depth d (see tp_volume.h).
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

// Linear3D (in -> out, with or without a bias) on n rows per rank of a q^3 cube.
void linear_3d(VolumePlan& plan, int q, int64_t n, int64_t in, int64_t out, bool bias = true) {
  const int64_t x = n * in / q * kF32, w = out / q * in / q * kF32, y = n * out / q * kF32;
  const int64_t b = out / (q * q) * kF32;
  for (bool backward : {kFwd, kBwd}) {
    gather_or_scatter(plan, backward, q, x, kAct);  // forward all-gather, backward dX scatter
    gather_or_scatter(plan, backward, q, y, kAct);  // forward scatter, backward dY all-gather
    gather_or_scatter(plan, backward, q, w, kParam);
    if (bias) gather_or_scatter(plan, backward, q, b, kParam);
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

// `times` copies of `part` added to `plan` (activation_bytes and complete: plan's, and both).
void accumulate(VolumePlan& plan, const VolumePlan& part, int64_t times) {
  plan.exchanges += times * part.exchanges;
  plan.forward_calls += times * part.forward_calls;
  plan.backward_calls += times * part.backward_calls;
  plan.payload_bytes += times * part.payload_bytes;
  plan.sent_bytes += times * part.sent_bytes;
  plan.extra_payload_bytes += times * part.extra_payload_bytes;
  plan.extra_sent_bytes += times * part.extra_sent_bytes;
  plan.param_sent_bytes += times * part.param_sent_bytes;
  plan.uncounted_calls += times * part.uncounted_calls;
  plan.uncounted_payload_bytes += times * part.uncounted_payload_bytes;
  plan.uncounted_sent_bytes += times * part.uncounted_sent_bytes;
  plan.complete = plan.complete && part.complete;
}

// 1D edges (P ranks, A = B T C floats): the vocab-parallel token embedding's all-reduce of A
// forward, the LM head's copy_to_region (its input gradient, A) backward, the cross-entropy's row
// statistics forward: B T floats (max), then 2 B T (sum-exp, target logit). The positions and
// ln_f are replicated and move nothing.
void gpt_edges_1d(VolumePlan& plan, int64_t batch, int64_t seq, int64_t c, int p) {
  if (p <= 1) return;  // serial edges move nothing
  const int64_t rows = batch * seq;
  plan.forward_calls += 1 + 2;
  plan.backward_calls += 1;
  add_all_reduces(plan, 2, rows * c, p, /*activation=*/true);
  add_all_reduces(plan, 1, rows, p, /*activation=*/false);
  add_all_reduces(plan, 1, 2 * rows, p, /*activation=*/false);
}

// 2D / 2.5D edges on the q x q grid of depth d (models/nn/parallel/vocab_2d.h, layer_norm_2d.h,
// parallel/tensor/vocab_cross_entropy_2d.h). n = B / (d q) x T rows per rank, V' = V padded to a
// multiple of q^2; bytes of f32 ("sent": this rank's, as the counters count).
//   token embedding  each depth layer looks up its B / d sequences, (B / d, T, C / q) partial rows,
//                    reduce-scattered over the column group forward and all-gathered backward:
//                    2 x (q-1)/q x 4 B/d T C/q sent
//   positions        the T rows looked up in the shard (T, C / q^2), all-gathered over the
//                    column group to (T, C / q) forward and reduce-scattered backward:
//                    2 x (q-1)/q x 4 T C/q (the rows the step uses, not the table's L)
//   ln_f             one LayerNorm2D on n rows (as a block's)
//   LM head          summa_abt(x, W) with W's block w = 4 V'/q x C/q bytes, the logits' block
//                    l = 4 n V'/q bytes: forward column q broadcasts of w (w sent), row q reduces
//                    of l ((q-1) l); backward dX = summa_ab(dY, W): row broadcasts of l (l), column
//                    broadcasts of w (w); dW = summa_atb(dY, X): row broadcasts of l (l), column
//                    reduces of w ((q-1) w). In all forward w + (q-1) l, backward 2 l + q w
//   cross-entropy    row all-reduces of n floats (max) and 2n (sum-exp, target logit), 2 (q-1)/q
//                    x 4 x 3n sent; then the chunk sums, one float over the batch group of d q
//                    ranks: floor(2 (dq-1)/(dq) x 4)
//   2.5D (d > 1)     backward, over the depth group: the token table's block gradient w, once
//                    when tied (the lookup and the head share one depth replica, so their
//                    gradients meet before the sum), twice when not, and the looked-up position
//                    rows' 4 T C/q^2: 2 (d-1)/d of each
void gpt_edges_2d(VolumePlan& plan, const SchemeLayout& s, const gpt::GPTConfig& config,
                  int64_t batch, int64_t seq) {
  const int q = s.q, d = s.depth;
  const int64_t c = config.d_model, v = config.vocab_size;
  const int64_t n = batch / (int64_t(d) * q) * seq;
  const int64_t v_pad = (v + int64_t(q) * q - 1) / (int64_t(q) * q) * (int64_t(q) * q);
  const int64_t lookup = batch / d * seq * (c / q) * kF32;  // (B / d, T, C / q)
  gather_or_scatter(plan, kFwd, q, lookup, kAct);
  gather_or_scatter(plan, kBwd, q, lookup, kAct);
  const int64_t positions = seq * (c / q) * kF32;  // (T, C / q)
  gather_or_scatter(plan, kFwd, q, positions, kParam);
  gather_or_scatter(plan, kBwd, q, positions, kParam);
  layer_norm_2d(plan, q, d, n, c);
  const int64_t w = v_pad / q * (c / q) * kF32, logits = n * (v_pad / q) * kF32;
  broadcast_steps(plan, kFwd, q, w, kParam);
  reduce_steps(plan, kFwd, q, logits, kAct);
  broadcast_steps(plan, kBwd, q, logits, kAct);  // dX = dY W: dY along the row
  broadcast_steps(plan, kBwd, q, w, kParam);     // and W along the column
  broadcast_steps(plan, kBwd, q, logits, kAct);  // dW = dY^T X: dY along the row
  reduce_steps(plan, kBwd, q, w, kParam);        // summed along the column
  all_reduce(plan, kFwd, q, n * kF32, kAct);
  all_reduce(plan, kFwd, q, 2 * n * kF32, kAct);
  all_reduce(plan, kFwd, d * q, kF32, kAct);
  if (d > 1) {
    // The token table's: the lookup's and the head's shared replica, or one each when untied.
    for (int i = 0; i < (config.tie_embeddings ? 1 : 2); ++i) all_reduce(plan, kBwd, d, w, kParam);
    all_reduce(plan, kBwd, d, seq * (c / q / q) * kF32, kParam);  // the position rows (T, C/q^2)
  }
}

// A collective on a group no counter of the context reads: predicted, kept out of sent_bytes.
void uncounted_all_reduce(VolumePlan& plan, int p, int64_t payload) {
  plan.uncounted_calls += 1;
  plan.uncounted_payload_bytes += payload;
  plan.uncounted_sent_bytes += ring_all_reduce_bytes(payload, p);
}

// 3D edges on the q^3 cube (models/nn/parallel/vocab_3d.h, layer_norm_3d.h,
// parallel/tensor/matmul_3d.h, vocab_cross_entropy_3d.h), every group q ranks. n = B / q x T rows
// per rank; bytes of f32.
//   token embedding  every rank looks up the whole batch's B T ids in its table piece, partial
//                    rows (B, T, C / q^2): all-to-all over the weight group (each rank gets its
//                    batch chunk of the feature block, (B / q, T, C / q), as many bytes), then
//                    reduce-scattered over the input group to (B / q, T, C / q^2); backward the
//                    all-gather and the all-to-all back: 4 x (q-1)/q x 4 B T C/q^2
//   positions        the T rows looked up in the shard (T, C / q^3) all-gathered over the weight
//                    group to (T, C / q^2) forward, reduce-scattered backward:
//                    2 x (q-1)/q x 4 T C/q^2
//   ln_f             one LayerNorm3D on n rows (as a block's)
//   LM head          linear_3d C -> V without a bias on n rows: x 4 n C/q, w 4 V/q x C/q,
//                    y 4 n V/q, each gathered or scattered once each way, (q-1)/q of it
//   cross-entropy    one float all-reduced over the weight group forward (the chunk sums), and the
//                    row statistics (n and 2n floats) all-reduced over the (j, k) plane of q^2
//                    ranks, a group VocabParallelLMHead3D splits off itself: no context group
//                    counts it, so it is predicted apart (uncounted_*), 2 (q^2-1)/q^2 x 4 x 3n
void gpt_edges_3d(VolumePlan& plan, const SchemeLayout& s, const gpt::GPTConfig& config,
                  int64_t batch, int64_t seq) {
  const int q = s.q;
  const int64_t c = config.d_model, v = config.vocab_size;
  const int64_t n = batch / q * seq, whole = batch * seq;
  // (B, T, C / q^2) partial rows, and their all-to-all (B / q, T, C / q): the same bytes, each
  // the payload of one collective each way (all-to-all: its input; reduce-scatter: its input;
  // all-gather: its output).
  const int64_t partial = whole * (c / q / q) * kF32;
  for (bool backward : {kFwd, kBwd}) {
    gather_or_scatter(plan, backward, q, partial, kAct);  // the weight group's all-to-all (back)
    gather_or_scatter(plan, backward, q, partial, kAct);  // the input group's reduce-scatter (AG)
  }
  const int64_t positions = seq * (c / q / q) * kF32;  // (T, C / q^2)
  gather_or_scatter(plan, kFwd, q, positions, kParam);
  gather_or_scatter(plan, kBwd, q, positions, kParam);
  layer_norm_3d(plan, q, n, c);
  linear_3d(plan, q, n, c, v, /*bias=*/false);
  all_reduce(plan, kFwd, q, kF32, kAct);
  uncounted_all_reduce(plan, q * q, n * kF32);
  uncounted_all_reduce(plan, q * q, 2 * n * kF32);
}

}  // namespace

const std::vector<parallel::TensorMode>& tp_modes() {
  static const std::vector<parallel::TensorMode> modes{
      parallel::TensorMode::one_d, parallel::TensorMode::two_d,
      parallel::TensorMode::two_point_five_d, parallel::TensorMode::three_d};
  return modes;
}

namespace {

// 1D: the P ranks in a row, priced as the ring all-reduce.
void lay_out_1d(SchemeLayout& s, int p) {
  s.fits = true;
  s.q = p;
  s.factor = 2.0 * (p - 1) / p;
  s.layout = str_cat("P=", p);
}

// 2D (e = 2) or 3D (e = 3): P = q^e.
void lay_out_grid(SchemeLayout& s, int p, int e) {
  s.q = exact_root(p, e);
  s.fits = s.q > 0;
  if (s.fits) {
    const double q = s.q;
    s.factor = e == 2 ? 6.0 * (q - 1) / q : 6.0 * (q - 1) / (q * q * q);
    s.layout = str_cat("q=", s.q);
  } else {
    s.layout = str_cat(p, " is not q^", e);
  }
}

// 2.5D: P = d q^2 with the largest q.
void lay_out_2_5d(SchemeLayout& s, int p) {
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
}

}  // namespace

SchemeLayout scheme_layout(parallel::TensorMode mode, int p) {
  TS_CHECK(p >= 1, "bench tp", "expected a positive rank count, got ", p);
  SchemeLayout s;
  s.mode = mode;
  switch (mode) {
    case parallel::TensorMode::one_d:
      lay_out_1d(s, p);
      break;
    case parallel::TensorMode::two_d:
      lay_out_grid(s, p, 2);
      break;
    case parallel::TensorMode::three_d:
      lay_out_grid(s, p, 3);
      break;
    case parallel::TensorMode::two_point_five_d:
      lay_out_2_5d(s, p);
      break;
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
  plan.activation_bytes = batch * seq * config.d_model * kF32;
  accumulate(plan, plan_1d_block(batch, seq, config.d_model, p), config.n_layers);
  gpt_edges_1d(plan, batch, seq, config.d_model, p);
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
  if (s.mode == parallel::TensorMode::one_d) {
    why = {need(dims.heads, "heads", q, str_cat("P = ", q)),
           need(dims.d_model, "features", q, str_cat("P = ", q))};
  } else if (s.mode == parallel::TensorMode::three_d) {
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
  if (s.mode == parallel::TensorMode::one_d) return plan_1d_block(batch, seq, c, s.q);
  TS_CHECK(s.fits, "bench tp", "no volume prediction for ", s.mode, " on ", s.layout);
  VolumePlan plan;
  plan.activation_bytes = batch * seq * c * kF32;
  plan.exchanges = 4;  // the 1D count the documentation's formula is priced at
  const int q = s.q;
  const std::vector<std::pair<int64_t, int64_t>> linears{
      {c, 3 * c}, {c, c}, {c, 4 * c}, {4 * c, c}};
  if (s.mode == parallel::TensorMode::three_d) {
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

VolumePlan plan_gpt_edges(const SchemeLayout& s, const gpt::GPTConfig& config, int64_t batch,
                          int64_t seq) {
  TS_CHECK(s.fits, "bench tp", "no volume prediction for ", s.mode, " on ", s.layout);
  VolumePlan plan;
  plan.activation_bytes = batch * seq * config.d_model * kF32;
  if (s.mode == parallel::TensorMode::one_d) {
    gpt_edges_1d(plan, batch, seq, config.d_model, s.q);
    return plan;  // its two activation all-reduces count in exchanges through add_all_reduces
  }
  plan.exchanges = 2;  // the 1D count the documentation's formula is priced at
  if (s.mode == parallel::TensorMode::three_d)
    gpt_edges_3d(plan, s, config, batch, seq);
  else
    gpt_edges_2d(plan, s, config, batch, seq);
  return plan;
}

VolumePlan plan_gpt_step(const SchemeLayout& s, const gpt::GPTConfig& config, int64_t batch,
                         int64_t seq) {
  if (s.mode == parallel::TensorMode::one_d) return plan_1d_gpt_step(config, batch, seq, s.q);
  VolumePlan plan = plan_gpt_edges(s, config, batch, seq);
  accumulate(plan, plan_block(s, batch, seq, config.d_model), config.n_layers);
  // plan_block's block has biases and an MLP of 4C; another GPT's blocks move other bytes.
  const int64_t hidden = config.mlp_hidden > 0 ? config.mlp_hidden : 4 * config.d_model;
  plan.complete = config.bias && hidden == 4 * config.d_model;
  return plan;
}

double doc_bytes(const SchemeLayout& layout, const VolumePlan& plan) {
  if (!layout.fits) return 0.0;
  return layout.factor * double(plan.exchanges) * double(plan.activation_bytes);
}

}  // namespace tessera::plan

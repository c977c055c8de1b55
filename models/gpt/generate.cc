// Autoregressive sampling for GPT: greedy at temperature 0, else temperature-scaled softmax over
// the top-k logits (see GPT::generate in gpt.h).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "autograd/ops.h"
#include "models/gpt/gpt.h"

namespace tessera::gpt {

int64_t sample_token(const std::vector<float>& logits, double temperature, int64_t top_k,
                     double u) {
  const int64_t v = int64_t(logits.size());
  TS_CHECK(v > 0, "sample_token", "expected at least one logit, got none");
  TS_CHECK(temperature >= 0.0 && std::isfinite(temperature), "generate",
           "expected a finite temperature >= 0, got ", temperature);
  if (temperature == 0.0)
    return int64_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
  // The k most likely tokens, most likely first (ties: lower id first, so exactly k survive).
  const int64_t k = top_k > 0 ? std::min(top_k, v) : v;
  std::vector<int64_t> order(static_cast<size_t>(v));
  std::iota(order.begin(), order.end(), 0);
  auto more_likely = [&](int64_t a, int64_t b) {
    return logits[size_t(a)] > logits[size_t(b)] ||
           (logits[size_t(a)] == logits[size_t(b)] && a < b);
  };
  std::partial_sort(order.begin(), order.begin() + k, order.end(), more_likely);
  order.resize(size_t(k));
  const double top = double(logits[size_t(order[0])]);
  std::vector<double> p(static_cast<size_t>(k));
  double total = 0.0;
  for (int64_t i = 0; i < k; ++i) {
    p[size_t(i)] = std::exp((double(logits[size_t(order[size_t(i)])]) - top) / temperature);
    total += p[size_t(i)];
  }
  double acc = 0.0;
  const double target = u * total;
  for (int64_t i = 0; i < k; ++i) {
    acc += p[size_t(i)];
    if (target < acc) return order[size_t(i)];
  }
  return order[size_t(k - 1)];  // u * total rounded up to the total
}

Tensor GPT::generate(const Tensor& ids, int64_t max_new_tokens, double temperature, int64_t top_k,
                     Generator& gen, const NextLogits& next_logits) {
  TS_CHECK(ids.defined() && ids.dim() == 2 && ids.size(1) >= 1, "generate",
           "expected prompt ids (B, T >= 1), got ", ids.defined() ? ids.describe() : "undefined");
  TS_CHECK(max_new_tokens >= 0, "generate", "expected max_new_tokens >= 0, got ", max_new_tokens);
  TS_CHECK(temperature >= 0.0 && std::isfinite(temperature), "generate",
           "expected a finite temperature >= 0, got ", temperature);
  autograd::NoGradGuard no_grad;
  // Eval mode for the whole call, restored even when forward throws.
  struct TrainingRestore {
    nn::Module& m;
    bool was;
    ~TrainingRestore() { m.train(was); }
  } restore{*this, is_training()};
  eval();
  const int64_t b = ids.size(0), vocab = config_.vocab_size;
  Tensor out = ids.to(DType::i64).contiguous();  // (B, T)
  for (int64_t step = 0; step < max_new_tokens; ++step) {
    const int64_t t = out.size(1), window = std::min(t, config_.context_length);
    const Tensor w = out.narrow(1, t - window, window);
    Tensor logits = next_logits ? next_logits(w) : forward(w).select(1, window - 1);  // (B, V)
    // f32 on the CPU whatever the model's dtype and device (a bf16/f16 model gives 16-bit logits).
    Tensor last = logits.to(kCPU).to(DType::f32).contiguous();
    const float* rows = last.data<float>();
    std::vector<double> draws(size_t(b), 0.0);
    if (temperature > 0.0) {
      Tensor u = rand({b}, {}, &gen);  // (B) in [0, 1)
      for (int64_t r = 0; r < b; ++r) draws[size_t(r)] = u.select(0, r).item();
    }
    std::vector<int64_t> next(static_cast<size_t>(b));
    for (int64_t r = 0; r < b; ++r) {
      std::vector<float> row(rows + r * vocab, rows + (r + 1) * vocab);
      next[size_t(r)] = sample_token(row, temperature, top_k, draws[size_t(r)]);
    }
    Tensor col = from_vector<int64_t>(next, {b, 1}).to(out.device());
    out = cat({out, col}, 1);  // (B, T + 1)
  }
  return out;
}

}  // namespace tessera::gpt

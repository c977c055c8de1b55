// GPT-2 124M shapes (hidden 768, 12 heads of 64, MLP 3072) at 256 and 1024 tokens, and the work
// counts that turn a time into GFLOP/s or GB/s.
#include "tools/bench/cases.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

namespace tessera::bench {
namespace {

constexpr int64_t kHidden = 768, kHeads = 12, kHeadDim = 64, kMlp = 3072;
constexpr double kF32 = 4.0;  // bytes per element

std::string pair_str(int64_t a, int64_t b) {
  return "(" + std::to_string(a) + ", " + std::to_string(b) + ")";
}

// The attention configurations: T = 256 with a batch of 4, T = 1024 with one sequence (both 1024
// tokens), as a GPT-2 training step would run them.
struct AttnShape {
  int64_t batch, seq;
};
constexpr AttnShape kAttn[] = {{4, 256}, {1, 1024}};

}  // namespace

std::vector<BenchCase> gpt2_cases() {
  std::vector<BenchCase> cases;
  auto add = [&](std::string op, std::vector<int64_t> dims, std::string shape, Metric metric,
                 double work) {
    cases.push_back(
        {int(cases.size()), std::move(op), std::move(dims), std::move(shape), metric, work});
  };
  const int64_t token_counts[] = {256, 1024};
  const int64_t linears[][2] = {
      {kHidden, 3 * kHidden}, {kHidden, kHidden}, {kHidden, kMlp}, {kMlp, kHidden}};

  // The forward (x W^T + b) and backward (dX = dY W, dW = dY^T X, db) of each linear.
  for (const char* op : {"linear", "linear_bwd"}) {
    const double products = std::string(op) == "linear" ? 1 : 2;
    for (int64_t n : token_counts) {
      for (const auto& l : linears) {
        const int64_t k = l[0], m = l[1];
        add(op, {n, k, m}, pair_str(n, k) + " -> " + pair_str(n, m), Metric::gflops,
            products * 2.0 * n * k * m);
      }
    }
    // The shards 1D tensor parallelism gives each of P ranks at 1024 tokens: the q|k|v projection
    // and the MLP's first linear split their outputs (column parallel), the attention output and
    // the MLP's second linear their inputs (row parallel). A shard that is a full shape or an
    // earlier shard (tp4's 768 -> 768) is not repeated.
    std::vector<std::pair<int64_t, int64_t>> seen = {{kHidden, kHidden}};
    for (int64_t p : {2, 4, 8}) {
      const int64_t shards[][2] = {{kHidden, 3 * kHidden / p},
                                   {kHidden / p, kHidden},
                                   {kHidden, kMlp / p},
                                   {kMlp / p, kHidden}};
      for (const auto& sh : shards) {
        const int64_t k = sh[0], m = sh[1], n = 1024;
        if (std::find(seen.begin(), seen.end(), std::make_pair(k, m)) != seen.end()) continue;
        seen.emplace_back(k, m);
        add(op, {n, k, m}, "tp" + std::to_string(p) + " " + pair_str(n, k) + " -> " + pair_str(n, m),
            Metric::gflops, products * 2.0 * n * k * m);
      }
    }
  }
  for (int64_t n : token_counts) {
    const double nc = double(n) * kHidden;
    // x in, y out, plus weight, bias, mean and rstd.
    add("layer_norm", {n, kHidden}, pair_str(n, kHidden), Metric::gbps,
        kF32 * (2 * nc + 2 * kHidden + 2 * n));
  }
  for (int64_t n : token_counts) {
    const double nc = double(n) * kHidden;
    // grad_y, x in, grad_x out, plus weight, mean, rstd in and grad_weight, grad_bias out.
    add("layer_norm_bwd", {n, kHidden}, pair_str(n, kHidden), Metric::gbps,
        kF32 * (3 * nc + 3 * kHidden + 2 * n));
  }
  for (const char* op : {"softmax", "softmax_bwd"}) {
    const double passes = std::string(op) == "softmax" ? 2 : 3;  // x -> y; y, grad_y -> grad_x
    for (const AttnShape& a : kAttn) {
      const int64_t rows = a.batch * kHeads * a.seq;
      add(op, {rows, a.seq},
          "(" + std::to_string(a.batch) + "*12*" + std::to_string(a.seq) + ", " +
              std::to_string(a.seq) + ")",
          Metric::gbps, kF32 * passes * double(rows) * a.seq);
    }
  }
  for (const char* op : {"gelu_tanh", "gelu_tanh_bwd"}) {
    const double passes = std::string(op) == "gelu_tanh" ? 2 : 3;  // x -> y; x, grad_y -> grad_x
    for (int64_t n : token_counts) {
      add(op, {n, kMlp}, pair_str(n, kMlp), Metric::gbps, kF32 * passes * double(n) * kMlp);
    }
  }
  for (const char* op : {"attention", "attention_fwd_bwd"}) {
    // QK^T and PV: 2 * 2*T*T*D per head, half of it under the causal mask; backward = 2.5x forward.
    const double factor = std::string(op) == "attention" ? 1.0 : 3.5;
    for (const AttnShape& a : kAttn) {
      const double fwd = 4.0 * a.batch * kHeads * double(a.seq) * a.seq * kHeadDim / 2.0;
      add(op, {a.batch, kHeads, a.seq, kHeadDim},
          "B" + std::to_string(a.batch) + " H12 T" + std::to_string(a.seq) + " D64 causal",
          Metric::gflops, factor * fwd);
    }
  }
  return cases;
}

std::vector<BenchCase> filter_cases(const std::vector<BenchCase>& cases,
                                    const std::string& substring) {
  std::vector<BenchCase> kept;
  for (const BenchCase& c : cases) {
    if ((c.op + " " + c.shape).find(substring) != std::string::npos) kept.push_back(c);
  }
  return kept;
}

double throughput(const BenchCase& c, double seconds) {
  return seconds > 0.0 ? c.work / seconds * 1e-9 : 0.0;
}

const char* metric_unit(Metric m) { return m == Metric::gflops ? "GFLOP/s" : "GB/s"; }

std::string cases_to_json(const std::vector<BenchCase>& cases) {
  nlohmann::json list = nlohmann::json::array();
  for (const BenchCase& c : cases) list.push_back({{"id", c.id}, {"op", c.op}, {"dims", c.dims}});
  return list.dump();
}

}  // namespace tessera::bench

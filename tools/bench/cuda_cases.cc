// Case lists, FLOP counts, MFU and the peer's spec for `bench cuda`.
#include "tools/bench/cuda_cases.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "tools/bench/bench_args.h"

namespace tessera::bench {

double AttentionCase::flops() const {
  const double forward = 4.0 * double(b) * double(h) * double(t) * double(t) * double(d) / 2.0;
  return backward ? 3.5 * forward : forward;
}

std::vector<std::vector<int64_t>> default_gemm_sizes() {
  // GPT-2 124M at B*T = 4096 tokens: c_attn 768 -> 2304, attn proj 768 -> 768, MLP 768 -> 3072
  // and 3072 -> 768; then a square GEMM large enough to reach the library's peak.
  return {{4096, 768, 2304}, {4096, 768, 768}, {4096, 768, 3072}, {4096, 3072, 768},
          {8192, 8192, 8192}};
}

std::vector<std::vector<int64_t>> default_attention_shapes() {
  return {{8, 12, 1024, 64}, {4, 16, 2048, 128}};
}

namespace {
int next_id(const CudaPlan& plan) {
  return int(plan.gemms.size() + plan.attention.size() + plan.train.size());
}
}  // namespace

void add_gemm_cases(CudaPlan& plan, const std::vector<DType>& dtypes,
                    const std::vector<std::vector<int64_t>>& sizes) {
  for (DType dt : dtypes) {
    for (const auto& s : sizes) {
      plan.gemms.push_back({.id = next_id(plan), .dtype = dt, .m = s.at(0), .k = s.at(1),
                            .n = s.at(2)});
    }
  }
}

void add_attention_cases(CudaPlan& plan, const std::vector<std::vector<int64_t>>& shapes) {
  for (const auto& s : shapes) {
    for (bool backward : {false, true}) {
      plan.attention.push_back({.id = next_id(plan), .backward = backward, .b = s.at(0),
                                .h = s.at(1), .t = s.at(2), .d = s.at(3)});
    }
  }
}

void add_train_cases(CudaPlan& plan, const std::vector<DType>& precisions,
                     const std::vector<std::pair<int64_t, int64_t>>& shapes) {
  for (DType p : precisions) {
    for (const auto& [b, t] : shapes) {
      plan.train.push_back({.id = next_id(plan), .precision = p, .batch = b, .seq = t});
    }
  }
}

std::string cuda_spec_json(const CudaPlan& plan, const std::string& section) {
  nlohmann::json cases = nlohmann::json::array();
  nlohmann::json spec = {{"section", section}, {"warmup", plan.warmup}, {"reps", plan.reps}};
  if (section == "gemm") {
    for (const GemmCase& c : plan.gemms) {
      cases.push_back({{"id", c.id},
                       {"dtype", dtype_name(c.dtype)},
                       {"m", c.m},
                       {"k", c.k},
                       {"n", c.n},
                       {"calls", calls_per_rep(c.flops())}});
    }
  } else if (section == "attention") {
    for (const AttentionCase& c : plan.attention) {
      cases.push_back({{"id", c.id},
                       {"pass", c.backward ? "fwd_bwd" : "fwd"},
                       {"b", c.b},
                       {"h", c.h},
                       {"t", c.t},
                       {"d", c.d},
                       {"causal", true},
                       {"calls", calls_per_rep(c.flops())}});
    }
  } else if (section == "train") {
    for (const TrainCase& c : plan.train) {
      cases.push_back({{"id", c.id},
                       {"precision", dtype_name(c.precision)},
                       {"batch", c.batch},
                       {"seq", c.seq}});
    }
    spec["config"] = plan.config.to_json();
    spec["steps"] = plan.steps;
    spec["lr"] = plan.lr;
    spec["weight_decay"] = plan.weight_decay;
  } else {
    throw UsageError("expected the section gemm, attention or train, got '" + section + "'");
  }
  spec["cases"] = cases;
  return spec.dump();
}

double mfu(int64_t params, double tokens_per_second, double peak_tflops) {
  if (peak_tflops <= 0.0) return 0.0;
  return 6.0 * double(params) * tokens_per_second / (peak_tflops * 1e12);
}

int calls_per_rep(double flops) {
  if (!(flops > 0.0)) return 1;
  return int(std::clamp(std::ceil(5e10 / flops), 1.0, 64.0));
}

std::vector<std::vector<int64_t>> parse_dim_lists(const std::string& flag, const std::string& text,
                                                  size_t rank) {
  std::vector<std::vector<int64_t>> lists;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    std::vector<int64_t> dims;
    size_t pos = 0;
    while (pos <= item.size()) {
      const size_t x = std::min(item.find('x', pos), item.size());
      dims.push_back(parse_int(flag, item.substr(pos, x - pos), 1, int64_t(1) << 20));
      pos = x + 1;
    }
    if (dims.size() != rank) {
      throw UsageError("expected " + flag + " items of " + std::to_string(rank) +
                       " sizes joined by 'x', got '" + item + "'");
    }
    lists.push_back(std::move(dims));
    start = comma + 1;
  }
  return lists;
}

std::vector<DType> parse_dtypes(const std::string& flag, const std::string& text,
                                const std::vector<DType>& allowed) {
  std::vector<DType> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    const auto it = std::find_if(allowed.begin(), allowed.end(),
                                 [&](DType d) { return item == dtype_name(d); });
    if (it == allowed.end()) {
      std::string names;
      for (DType d : allowed) names += std::string(names.empty() ? "" : ", ") + dtype_name(d);
      throw UsageError("expected " + flag + " to list dtypes out of " + names + ", got '" + item +
                       "'");
    }
    out.push_back(*it);
    start = comma + 1;
  }
  return out;
}

double parse_double(const std::string& flag, const std::string& text, double min, double max) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v) || v < min || v > max) {
    throw UsageError("expected " + flag + " to be a number in [" + std::to_string(min) + ", " +
                     std::to_string(max) + "], got '" + text + "'");
  }
  return v;
}

}  // namespace tessera::bench

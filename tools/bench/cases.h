// The GPT-2 124M benchmark cases: which op, on which shape, and how much work one call does
// (flops for compute-bound ops, bytes read + written for memory-bound ones).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::bench {

enum class Metric { gflops, gbps };

struct BenchCase {
  int id = 0;                 // position in gpt2_cases(); the peer answers by id
  std::string op;             // "linear", "layer_norm_bwd", ...; torch_peer.py knows the same names
  std::vector<int64_t> dims;  // op-specific sizes, see gpt2_cases()
  std::string shape;          // for the table
  Metric metric = Metric::gflops;
  double work = 0.0;  // flops or bytes per call
};

// Every case, in table order. dims: linear* (M, K, N), the weight (N, K); layer_norm*, gelu_tanh*
// (N, C);
// softmax* (rows, cols); attention* (B, H, T, D), causal.
std::vector<BenchCase> gpt2_cases();

// Cases whose "op shape" text contains `substring` (all when it is empty).
std::vector<BenchCase> filter_cases(const std::vector<BenchCase>& cases,
                                    const std::string& substring);

// GFLOP/s or GB/s for one call taking `seconds`.
double throughput(const BenchCase& c, double seconds);
const char* metric_unit(Metric m);

// The peer's input: a JSON list of {"id", "op", "dims"}.
std::string cases_to_json(const std::vector<BenchCase>& cases);

}  // namespace tessera::bench

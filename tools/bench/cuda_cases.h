// The cases of `bench cuda` (GEMMs, fused attention, GPT training steps), their FLOP counts, the
// peer's JSON spec and the option readers for them. No GPU code: built and tested everywhere.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "models/gpt/gpt_config.h"

namespace tessera::bench {

// out (M, N) = a (M, K) @ b (K, N).
struct GemmCase {
  int id = 0;
  DType dtype = DType::bf16;
  int64_t m = 0, k = 0, n = 0;
  double flops() const { return 2.0 * double(m) * double(k) * double(n); }
};

// Causal self-attention on q, k, v (B, H, T, D); forward alone or forward then backward.
struct AttentionCase {
  int id = 0;
  bool backward = false;  // false: forward only; true: forward + backward
  int64_t b = 0, h = 0, t = 0, d = 0;
  // As flash-attention's benchmarks count: 4 B H T^2 D for the forward (two GEMMs), halved when
  // causal; the backward is 2.5x the forward (five GEMMs), so forward + backward is 3.5x.
  double flops() const;
};

// One GPT training step (forward, backward, AdamW) at one precision and batch shape.
struct TrainCase {
  int id = 0;
  DType precision = DType::f32;  // f32, or bf16 with f32 master weights
  int64_t batch = 0, seq = 0;
};

struct CudaPlan {
  std::vector<GemmCase> gemms;
  std::vector<AttentionCase> attention;
  std::vector<TrainCase> train;
  std::string model = "gpt2-124m";
  gpt::GPTConfig config;
  int warmup = 2;  // untimed calls (kernels) or steps (train) first
  int reps = 20;   // timed repetitions per kernel case; the median is reported
  int steps = 5;   // timed training steps per case; the median is reported
  double lr = 1e-4;
  double weight_decay = 0.01;
};

// Default sizes: the GPT-2 124M GEMMs at B*T = 4096 tokens (QKV, attention projection, MLP up,
// MLP down) and 8192^3; attention at GPT-2 small (8, 12, 1024, 64) and a larger head (4, 16, 2048,
// 128); the training step at 8 x 1024.
std::vector<std::vector<int64_t>> default_gemm_sizes();        // {M, K, N} each
std::vector<std::vector<int64_t>> default_attention_shapes();  // {B, H, T, D} each

// Numbers the cases with one id sequence across the sections (the peer answers by id): GEMMs in
// dtype-major order, attention forward then forward+backward per shape, training steps
// precision-major.
void add_gemm_cases(CudaPlan& plan, const std::vector<DType>& dtypes,
                    const std::vector<std::vector<int64_t>>& sizes);
void add_attention_cases(CudaPlan& plan, const std::vector<std::vector<int64_t>>& shapes);
void add_train_cases(CudaPlan& plan, const std::vector<DType>& precisions,
                     const std::vector<std::pair<int64_t, int64_t>>& shapes);

// The peer's input for one section ("gemm", "attention" or "train"; see torch_cuda_peer.py):
// {"section", "warmup", "reps", "cases": [...]} and for train also "config", "steps", "lr",
// "weight_decay".
std::string cuda_spec_json(const CudaPlan& plan, const std::string& section);

// Model FLOPs utilisation: 6 * params * tokens per second over the peak (TFLOP/s), as a fraction.
double mfu(int64_t params, double tokens_per_second, double peak_tflops);

// How many calls one timed repetition of a kernel case makes, so a rep spans at least ~50 GFLOP
// (short kernels are measured over several back-to-back calls): in [1, 64].
int calls_per_rep(double flops);

// "4096x768x2304,8192x8192x8192" -> {{4096, 768, 2304}, ...}: `rank` positive integers per item,
// else UsageError naming the flag.
std::vector<std::vector<int64_t>> parse_dim_lists(const std::string& flag, const std::string& text,
                                                  size_t rank);
// "bf16,f16,f32" -> dtypes, each one of `allowed` (UsageError otherwise, or when empty).
std::vector<DType> parse_dtypes(const std::string& flag, const std::string& text,
                                const std::vector<DType>& allowed);
// A finite number in [min, max], else UsageError.
double parse_double(const std::string& flag, const std::string& text, double min, double max);

}  // namespace tessera::bench

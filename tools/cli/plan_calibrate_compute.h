// `tessera plan calibrate`'s compute half, run by one rank with every core it may use: the FMA
// peak, GEMMs over the shapes transformer layers run, fused attention, an element-wise kernel
// against the memory bandwidth, one tiny op's overhead and the Adam step's speed. Every timing is
// the fastest of its repetitions (see plan_calibrate_compute.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/plan/calibration.h"

namespace tessera::cli {

struct ComputeOptions {
  bool quick = false;  // tiny shapes and few repetitions (tests): numbers are rough
  int threads = 1;     // the threads every measurement uses
};

// One timed GEMM of the sweep, for the printed table.
struct GemmRow {
  std::string dtype;
  int64_t m = 0, k = 0, n = 0;
  double flops_per_s = 0;
  double efficiency = 0;  // of the f32 peak over `threads` cores
};

struct ComputeMeasurements {
  int threads = 1;
  double core_peak_flops = 0;          // one core, f32 FMA
  double memory_bandwidth = 0;         // triad over `threads` threads
  std::vector<plan::GemmSample> gemm;  // f32 sweep
  std::vector<GemmRow> rows;           // every timed GEMM (f32, bf16, f16)
  double bf16_ratio = 0;               // bf16 / f32 GEMM speed on the sweep's largest shape
  double f16_ratio = 0;                // f16 / f32 likewise
  double attention_efficiency = 0;     // fwd + bwd FLOPs / time / (peak x threads)
  double elementwise_efficiency = 0;   // an f32 add's bytes/s / memory_bandwidth
  double launch_overhead_s = 0;        // one op on a 1-element tensor, through the op API
  double block_overhead_s = 0;         // a GPT block's forward + backward at a negligible width
  double micro_batch_overhead_s = 0;   // a micro-batch's besides its blocks, likewise
  double adam_params_per_s = 0;        // f32 AdamW over `threads` threads
};

ComputeMeasurements measure_compute(const ComputeOptions& options);

}  // namespace tessera::cli

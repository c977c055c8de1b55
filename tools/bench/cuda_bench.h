// Tessera's side of `bench cuda`, on one GPU: cuBLASLt GEMMs and the fused attention kernels timed
// with CUDA events, and the GPT training step (f32, or bf16 with f32 master weights) with its
// device-memory peak. Built only with the CUDA backend; the header itself needs no CUDA headers.
#pragma once

#include <cstdint>
#include <string>

#include "models/gpt/gpt_config.h"
#include "tools/bench/cuda_cases.h"

namespace tessera::bench {

// "NVIDIA H200, 132 SMs, 139.8 GiB, compute capability 9.0, driver 13.0, runtime 13.0".
std::string cuda_device_description(int device);

// Seconds per call of kernels::matmul on the case's operands (random values on `device`): the
// median over reps of CUDA-event time around calls_per_rep() back-to-back calls, after warmup
// calls.
double time_gemm(const GemmCase& c, int device, int warmup, int reps);

// Seconds per call of kernels::attention_forward (then attention_backward when c.backward),
// causal, bf16, timed as time_gemm.
double time_attention(const AttentionCase& c, int device, int warmup, int reps);

struct CudaTrainResult {
  double step_seconds = 0;       // median wall time of a step, the device synchronised at its end
  int64_t peak_device_bytes = 0;  // memory_stats(cuda:device).peak_bytes from model build to end
  double last_loss = 0;
};

// A fresh GPT (fixed seed) on `device` and AdamW (lr, weight decay), bf16 through
// optim::MasterWeights as the trainer does; warmup then steps timed steps on one random batch.
// Throws tessera::Error on a non-finite loss.
CudaTrainResult time_cuda_train_step(const gpt::GPTConfig& config, const TrainCase& c, int device,
                                     const CudaPlan& plan);

// Returns the caching allocator's unused memory to the driver (before the PyTorch peer runs);
// reports a failure on stderr instead of throwing.
void release_cached_device_memory();

}  // namespace tessera::bench

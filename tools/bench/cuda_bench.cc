// Tessera's GPU timings for `bench cuda`: event-timed kernel calls and the GPT training step.
#include "tools/bench/cuda_bench.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <functional>
#include <vector>

#include "autograd/engine.h"
#include "core/allocator.h"
#include "core/cuda/caching_allocator.h"
#include "core/cuda/runtime.h"
#include "core/cuda/stream.h"
#include "core/error.h"
#include "core/factory.h"
#include "kernels/kernels.h"
#include "models/gpt/gpt.h"
#include "optim/adam.h"
#include "optim/mixed_precision.h"
#include "tools/bench/timer.h"

namespace tessera::bench {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t mid = v.size() / 2;
  return v.size() % 2 == 1 ? v[mid] : 0.5 * (v[mid - 1] + v[mid]);
}

// Median seconds per call of fn: each of `reps` repetitions brackets `calls` back-to-back calls
// with events on the device's current stream (where every Tessera kernel launches).
double median_event_seconds(const std::function<void()>& fn, int device, int warmup, int reps,
                            int calls) {
  TS_CHECK(reps > 0 && calls > 0 && warmup >= 0, "bench cuda",
           "expected reps > 0, calls > 0 and warmup >= 0, got ", reps, ", ", calls, " and ",
           warmup);
  const cudaStream_t stream = cuda::current_stream(device);
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<cuda::Event> starts, ends;
  starts.reserve(size_t(reps));
  ends.reserve(size_t(reps));
  for (int r = 0; r < reps; ++r) {
    starts.emplace_back(/*timing=*/true);
    ends.emplace_back(/*timing=*/true);
  }
  for (int r = 0; r < reps; ++r) {
    starts[size_t(r)].record(stream, device);
    for (int c = 0; c < calls; ++c) fn();
    ends[size_t(r)].record(stream, device);
  }
  ends.back().synchronize();
  TS_CUDA_CHECK(cudaGetLastError());
  std::vector<double> seconds;
  for (int r = 0; r < reps; ++r) {
    seconds.push_back(double(starts[size_t(r)].elapsed_ms(ends[size_t(r)])) * 1e-3 / calls);
  }
  return median(std::move(seconds));
}

// Random normal values drawn on the host in f32, rounded to dtype there, then copied to the GPU.
Tensor random_on(const Shape& shape, DType dtype, Device dev, uint64_t seed) {
  Generator gen(seed);
  return randn(shape, {.dtype = DType::f32}, &gen).to(dtype).to(dev);
}

}  // namespace

std::string cuda_device_description(int device) {
  cudaDeviceProp prop{};
  TS_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  int driver = 0, runtime = 0;
  TS_CUDA_CHECK(cudaDriverGetVersion(&driver));
  TS_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "%s, %d SMs, %.1f GiB, compute capability %d.%d, driver %d.%d, runtime %d.%d",
                prop.name, prop.multiProcessorCount,
                double(prop.totalGlobalMem) / double(int64_t(1) << 30), prop.major, prop.minor,
                driver / 1000, (driver % 1000) / 10, runtime / 1000, (runtime % 1000) / 10);
  return buf;
}

double time_gemm(const GemmCase& c, int device, int warmup, int reps) {
  const Device dev = cuda_device(device);
  const Tensor a = random_on({c.m, c.k}, c.dtype, dev, 1);  // (M, K)
  const Tensor b = random_on({c.k, c.n}, c.dtype, dev, 2);  // (K, N)
  const Tensor out = empty({c.m, c.n}, {.dtype = c.dtype, .device = dev});  // (M, N)
  return median_event_seconds([&] { kernels::matmul(a, b, out); }, device, warmup, reps,
                              calls_per_rep(c.flops()));
}

double time_attention(const AttentionCase& c, int device, int warmup, int reps) {
  const Device dev = cuda_device(device);
  const Shape qkv = {c.b, c.h, c.t, c.d};
  const Tensor q = random_on(qkv, DType::bf16, dev, 3), k = random_on(qkv, DType::bf16, dev, 4),
               v = random_on(qkv, DType::bf16, dev, 5);             // (B, H, T, D) each
  const Tensor grad_out = random_on(qkv, DType::bf16, dev, 6);      // (B, H, T, D)
  const Tensor out = empty(qkv, {.dtype = DType::bf16, .device = dev});
  const Tensor lse = empty({c.b, c.h, c.t}, {.dtype = DType::f32, .device = dev});  // (B, H, T)
  const Tensor gq = empty_like(q), gk = empty_like(k), gv = empty_like(v);
  const kernels::AttentionOptions opts{.causal = true};
  const Tensor no_mask;
  auto call = [&] {
    kernels::attention_forward(q, k, v, no_mask, opts, out, lse);
    if (c.backward)
      kernels::attention_backward(q, k, v, out, lse, grad_out, no_mask, opts, gq, gk, gv);
  };
  return median_event_seconds(call, device, warmup, reps, calls_per_rep(c.flops()));
}

CudaTrainResult time_cuda_train_step(const gpt::GPTConfig& config, const TrainCase& c, int device,
                                     const CudaPlan& plan) {
  TS_CHECK(c.batch > 0 && c.seq > 0 && c.seq <= config.context_length, "bench cuda",
           "expected 0 < T <= context_length ", config.context_length, " and B > 0, got B=",
           c.batch, " T=", c.seq);
  TS_CHECK(c.precision == DType::f32 || c.precision == DType::bf16, "bench cuda",
           "expected the precision f32 or bf16, got ", dtype_name(c.precision));
  const Device dev = cuda_device(device);
  cuda::empty_cache();
  reset_peak_memory(dev);
  CudaTrainResult r;
  {
    Generator init(1234);
    gpt::GPT model(config, init);
    model.train();
    model.to(dev);
    if (c.precision != DType::f32) model.to(c.precision);
    // f32 masters of the bf16 parameters (f32 parameters are their own), stepped by AdamW.
    const optim::MasterWeights masters(model.parameters());
    optim::AdamW opt(masters.masters(), optim::AdamWOptions{.lr = plan.lr,
                                                            .weight_decay = plan.weight_decay});
    Generator data(99);
    const Tensor ids =
        randint(0, config.vocab_size, {c.batch, c.seq + 1}, {.dtype = DType::i64}, &data);
    const Tensor x = ids.narrow(1, 0, c.seq).contiguous().to(dev);  // (B, T)
    const Tensor y = ids.narrow(1, 1, c.seq).contiguous().to(dev);  // (B, T)
    auto step = [&] {
      const Tensor loss = model.loss(x, y);
      autograd::backward({loss});
      masters.grads_to_master();
      opt.step();
      masters.master_to_model();
      masters.zero_grad();
      r.last_loss = loss.item();
      TS_CUDA_CHECK(cudaDeviceSynchronize());
    };
    r.step_seconds = median_seconds(step, {.warmup = plan.warmup,
                                           .min_seconds = 0.0,
                                           .min_reps = plan.steps,
                                           .max_reps = plan.steps});
  }
  TS_CHECK(std::isfinite(r.last_loss), "bench cuda", "expected a finite loss, got ", r.last_loss);
  r.peak_device_bytes = memory_stats(dev).peak_bytes;
  return r;
}

void release_cached_device_memory() {
  try {
    cuda::empty_cache();
  } catch (const std::exception& e) {
    // After a failed case the device may be unusable; the tables are still worth printing.
    std::fprintf(stderr, "[bench] empty_cache failed: %s\n", e.what());
  }
}

}  // namespace tessera::bench

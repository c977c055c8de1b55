// The CUDA multi-tensor Adam / AdamW body (kernels/cuda/adam_body.cuh) under the SIMT emulator
// against the CPU kernel, bit for bit: many tensors of odd sizes (1 element, under and over one
// chunk) in one table and in several tables, Adam and AdamW with weight decay at early and late
// steps, f16/bf16 params and grads beside f32 moments, and a grid smaller than the chunk count.
#include <catch2/catch.hpp>
#include <vector>

#include "core/factory.h"
#include "kernels/cuda/adam_body.cuh"
#include "kernels/kernels.h"
#include "tests/testing/compare.h"
#include "tests/testing/simt_emulator.h"

namespace {

using namespace tessera;
namespace ab = tessera::kernels::cuda::adam_body;
using kernels::AdamStep;
using kernels::AdamTensors;

struct State {
  Tensor param, grad, exp_avg, exp_avg_sq;
};

// f32 moments at plausible magnitudes (exp_avg_sq non-negative).
Tensor scaled(const Tensor& t, float s) {
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] *= s;
  return t;
}

State make_state(int64_t n, DType p_dt, DType g_dt, uint64_t seed) {
  Generator gen(seed);
  State s;
  s.param = randn({n}, {.dtype = p_dt}, &gen);
  s.grad = randn({n}, {.dtype = g_dt}, &gen);
  s.exp_avg = scaled(randn({n}, {}, &gen), 0.1f);
  s.exp_avg_sq = scaled(rand({n}, {}, &gen), 0.01f);
  return s;
}

State clone(const State& s) {
  return {s.param.clone(), s.grad.clone(), s.exp_avg.clone(), s.exp_avg_sq.clone()};
}

// The launcher on entries of one (param, grad) dtype pair: tables of ab::kMaxTensors, one launch
// each; `max_blocks` below the table's chunk count makes blocks loop over several chunks.
void emulated_multi(const std::vector<State>& entries, const kernels::AdamCoeffs& c,
                    unsigned max_blocks = 0) {
  dispatch_floating(entries.front().param.dtype(), "test", [&]<typename P>() {
    dispatch_floating(entries.front().grad.dtype(), "test", [&]<typename G>() {
      for (size_t first = 0; first < entries.size(); first += ab::kMaxTensors) {
        ab::MultiTable<P, G> table{};
        for (size_t e = first; e < entries.size() && e < first + ab::kMaxTensors; ++e) {
          const State& s = entries[e];
          ab::table_add(table, static_cast<P*>(s.param.data_ptr()),
                        static_cast<const G*>(s.grad.data_ptr()), s.exp_avg.data<float>(),
                        s.exp_avg_sq.data<float>(), s.param.numel());
        }
        unsigned blocks = ab::table_blocks(table);
        if (max_blocks != 0 && max_blocks < blocks) blocks = max_blocks;
        simt::emulate(blocks, ab::kThreads, 0, [&](int64_t block, int tid, unsigned char*) {
          ab::adam_multi(table, c, block, blocks, tid, ab::kThreads);
        });
      }
    });
  });
}

void run_case(const std::vector<int64_t>& sizes, DType p_dt, DType g_dt, const AdamStep& step,
              unsigned max_blocks = 0) {
  INFO("param " << dtype_name(p_dt) << " grad " << dtype_name(g_dt) << " tensors " << sizes.size()
                << " step " << step.step << (step.decoupled ? " AdamW" : " Adam") << " wd "
                << step.weight_decay << " max_blocks " << max_blocks);
  std::vector<State> ref, emu;
  std::vector<AdamTensors> ref_tensors;
  for (size_t i = 0; i < sizes.size(); ++i) {
    ref.push_back(make_state(sizes[i], p_dt, g_dt, 100 + i));
    emu.push_back(clone(ref.back()));
    const State& r = ref.back();
    ref_tensors.push_back({r.param, r.grad, r.exp_avg, r.exp_avg_sq});
  }
  kernels::adam_update_multi(ref_tensors, step);
  const kernels::AdamCoeffs c = kernels::adam_coeffs(step.lr, step.beta1, step.beta2, step.eps,
                                                     step.weight_decay, step.decoupled, step.step);
  emulated_multi(emu, c, max_blocks);
  for (size_t i = 0; i < sizes.size(); ++i) {
    INFO("tensor " << i << " of " << sizes[i] << " elements");
    testing::require_close(emu[i].param, ref[i].param, 0.0, 0.0);
    testing::require_close(emu[i].exp_avg, ref[i].exp_avg, 0.0, 0.0);
    testing::require_close(emu[i].exp_avg_sq, ref[i].exp_avg_sq, 0.0, 0.0);
    testing::require_close(emu[i].grad, ref[i].grad, 0.0, 0.0);  // read only
  }
}

AdamStep adamw(int64_t step) {
  AdamStep s;
  s.lr = 1e-2f;
  s.beta1 = 0.9f;
  s.beta2 = 0.999f;
  s.eps = 1e-8f;
  s.weight_decay = 0.1f;
  s.decoupled = true;
  s.step = step;
  return s;
}

AdamStep adam(int64_t step) {
  AdamStep s = adamw(step);
  s.decoupled = false;
  s.weight_decay = 0.01f;
  s.beta2 = 0.95f;
  return s;
}

}  // namespace

TEST_CASE("adam (emulated) equals the CPU on odd-sized tensors in one launch", "[simt][adam]") {
  // 1 element, under a warp, over a block's stride, exactly and just over one chunk, several
  // chunks.
  const std::vector<int64_t> sizes{1, 31, 513, ab::kChunk, ab::kChunk + 1, 3 * ab::kChunk + 77};
  run_case(sizes, DType::f32, DType::f32, adamw(1));
  run_case(sizes, DType::f32, DType::f32, adam(1));
  run_case(sizes, DType::f32, DType::f32, adamw(1000));
  run_case(sizes, DType::f32, DType::f32, adam(37));
}

TEST_CASE("adam (emulated) equals the CPU with 16-bit params and grads", "[simt][adam]") {
  const std::vector<int64_t> sizes{1, 77, ab::kChunk + 3};
  for (DType p_dt : {DType::f32, DType::f16, DType::bf16}) {
    for (DType g_dt : {DType::f32, DType::f16, DType::bf16}) {
      if (p_dt == DType::f32 && g_dt == DType::f32) continue;
      run_case(sizes, p_dt, g_dt, adamw(3));
      run_case(sizes, p_dt, g_dt, adam(2));
    }
  }
}

TEST_CASE("adam (emulated) splits many tensors into tables and loops a small grid",
          "[simt][adam]") {
  // 2 * kMaxTensors + 5 tensors: three tables, the last one partly filled.
  std::vector<int64_t> sizes;
  for (int i = 0; i < 2 * ab::kMaxTensors + 5; ++i) sizes.push_back(1 + (i * 37) % 301);
  sizes[10] = 2 * ab::kChunk + 5;
  run_case(sizes, DType::bf16, DType::f32, adamw(5));
  // Fewer blocks than chunks: each block walks chunks block, block + blocks, ...
  run_case({5, 2 * ab::kChunk + 9, 1, ab::kChunk - 1, 3}, DType::f32, DType::f32, adamw(2), 2);
}

// Adam / AdamW on the GPU against the CPU, bit for bit (both run adam_math.h's adam_element): the
// per-tensor update and the multi-tensor launch over more tensors than one table holds, mixed
// dtypes, empty tensors and sizes that straddle chunks. The CPU form of adam_update_multi is tested
// here too (it needs no GPU).
#include <catch2/catch.hpp>

#include <vector>

#include "core/factory.h"
#include "kernels/kernels.h"
#include "tests/testing/compare.h"
#include "tests/testing/cuda.h"

using namespace tessera;
using testing::require_close;

namespace {

// One parameter's four tensors on the CPU (v >= 0, as a running mean of squares is).
kernels::AdamTensors make_entry(int64_t n, DType p_dt, DType g_dt, uint64_t seed) {
  Generator gen(seed);
  kernels::AdamTensors a;
  a.param = randn({n}, {.dtype = p_dt}, &gen);
  a.grad = randn({n}, {.dtype = g_dt}, &gen);
  a.exp_avg = randn({n}, {}, &gen);
  a.exp_avg_sq = rand({n}, {}, &gen);
  return a;
}

kernels::AdamTensors clone_to(const kernels::AdamTensors& a, Device d) {
  return {a.param.to(d).clone(), a.grad.to(d).clone(), a.exp_avg.to(d).clone(),
          a.exp_avg_sq.to(d).clone()};
}

void require_same(const kernels::AdamTensors& got, const kernels::AdamTensors& want) {
  require_close(got.param, want.param, 0.0, 0.0);
  require_close(got.exp_avg, want.exp_avg, 0.0, 0.0);
  require_close(got.exp_avg_sq, want.exp_avg_sq, 0.0, 0.0);
}

kernels::AdamStep step_of(bool decoupled, int64_t step) {
  kernels::AdamStep s;
  s.lr = 3e-3f;
  s.weight_decay = 0.05f;
  s.decoupled = decoupled;
  s.step = step;
  return s;
}

const DType kFloating[] = {DType::f32, DType::f16, DType::bf16};

}  // namespace

TEST_CASE("cuda adam_update equals the CPU bit for bit") {
  TS_REQUIRE_GPU();
  uint64_t seed = 1;
  for (DType p_dt : kFloating) {
    for (DType g_dt : kFloating) {
      for (int64_t n : {int64_t(1), int64_t(1000), int64_t(70001)}) {
        INFO("param " << dtype_name(p_dt) << " grad " << dtype_name(g_dt) << " n " << n);
        const kernels::AdamTensors cpu = make_entry(n, p_dt, g_dt, seed++);
        const kernels::AdamTensors gpu = clone_to(cpu, cuda_device());
        for (int64_t step = 1; step <= 3; ++step) {
          const kernels::AdamStep s = step_of(step % 2 == 1, step);
          kernels::adam_update(cpu.param, cpu.grad, cpu.exp_avg, cpu.exp_avg_sq, s);
          kernels::adam_update(gpu.param, gpu.grad, gpu.exp_avg, gpu.exp_avg_sq, s);
        }
        require_same(gpu, cpu);
      }
    }
  }
}

TEST_CASE("cuda adam_update_multi updates many tensors in few launches like the CPU") {
  TS_REQUIRE_GPU();
  // 100 tensors: more than one parameter table, all nine dtype pairings, empty ones, chunk edges.
  const int64_t sizes[] = {0, 1, 7, 16383, 16384, 16385, 40000, 3, 100};
  std::vector<kernels::AdamTensors> cpu, gpu;
  for (int k = 0; k < 100; ++k) {
    const DType p_dt = kFloating[k % 3], g_dt = kFloating[(k / 3) % 3];
    cpu.push_back(make_entry(sizes[k % 9], k < 60 ? DType::f32 : p_dt, g_dt, uint64_t(100 + k)));
    gpu.push_back(clone_to(cpu.back(), cuda_device()));
  }
  for (int64_t step = 1; step <= 2; ++step) {
    const kernels::AdamStep s = step_of(true, step);
    kernels::adam_update_multi(cpu, s);
    kernels::adam_update_multi(gpu, s);
  }
  for (size_t k = 0; k < cpu.size(); ++k) {
    INFO("tensor " << k);
    require_same(gpu[k], cpu[k]);
  }
  // Mixed devices are an error, not a wild pointer.
  std::vector<kernels::AdamTensors> mixed = {gpu[1], cpu[1]};
  CHECK_THROWS_WITH(kernels::adam_update_multi(mixed, step_of(true, 1)), Catch::Contains("cuda:0"));
}

TEST_CASE("adam_update_multi on the CPU equals adam_update per tensor") {
  std::vector<kernels::AdamTensors> multi, single;
  for (int k = 0; k < 7; ++k) {
    multi.push_back(make_entry(1 + 37 * k, kFloating[k % 3], kFloating[(k + 1) % 3], uint64_t(k)));
    single.push_back(clone_to(multi.back(), kCPU));
  }
  for (int64_t step = 1; step <= 3; ++step) {
    const kernels::AdamStep s = step_of(step != 2, step);
    kernels::adam_update_multi(multi, s);
    for (const kernels::AdamTensors& a : single) {
      kernels::adam_update(a.param, a.grad, a.exp_avg, a.exp_avg_sq, s);
    }
  }
  for (size_t k = 0; k < multi.size(); ++k) require_same(multi[k], single[k]);
  // The update moved the parameters (the comparison above is not between untouched copies).
  const kernels::AdamTensors fresh = make_entry(1, kFloating[0], kFloating[1], 0);
  CHECK(multi[0].param.item() != fresh.param.item());

  kernels::adam_update_multi({}, step_of(true, 1));  // nothing to do
  std::vector<kernels::AdamTensors> bad = {make_entry(5, DType::f32, DType::f32, 1)};
  bad[0].exp_avg = zeros({4});
  CHECK_THROWS_WITH(kernels::adam_update_multi(bad, step_of(true, 1)),
                    Catch::Contains("exp_avg") && Catch::Contains("5 elements"));
}

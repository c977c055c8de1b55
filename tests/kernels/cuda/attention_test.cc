// CUDA fused attention against the CPU kernel on the same inputs: outputs, lse and all three
// gradients for f32, f16 and bf16, head dims 32/64/128, odd T and S (not multiples of the 32-wide
// tiles), T != S, causal, padding masks with fully masked rows, dropout (same philox mask), scale
// override, strided views and empty sequences. Skips without a GPU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/factory.h"
#include "kernels/kernels.h"
#include "tests/testing/compare.h"
#include "tests/testing/cuda.h"

namespace {

using namespace tessera;
using kernels::AttentionOptions;

struct Case {
  int64_t B, H, T, S, D;
  DType dtype;
  bool causal = false;
  bool mask = false;
  float dropout = 0.0f;
  bool strided = false;  // q, k, v, grad_out as permuted (B, L, H, D) storage
  float scale = 0.0f;
};

std::string name_of(const Case& c) {
  return "B" + std::to_string(c.B) + " H" + std::to_string(c.H) + " T" + std::to_string(c.T) + " S" +
         std::to_string(c.S) + " D" + std::to_string(c.D) + " " + dtype_name(c.dtype) +
         (c.causal ? " causal" : "") + (c.mask ? " mask" : "") + (c.dropout > 0 ? " dropout" : "") +
         (c.strided ? " strided" : "");
}

// A (B, H, L, D) input on `device`: dense, or a permuted view of (B, L, H, D) storage. The values
// depend only on the seed, so the CPU and CUDA copies hold the same numbers.
Tensor head_input(const Case& c, int64_t L, uint64_t seed, Device device) {
  Generator gen(seed);
  if (!c.strided) return randn({c.B, c.H, L, c.D}, {.dtype = c.dtype}, &gen).to(device);
  return randn({c.B, L, c.H, c.D}, {.dtype = c.dtype}, &gen).to(device).permute({0, 2, 1, 3});
}

// Padding mask (B, S): batch 0 attends to every key, batch 1 to none (fully masked rows), the
// others to a pseudo-random subset.
Tensor padding_mask(const Case& c) {
  std::vector<float> m(size_t(c.B * c.S));
  for (int64_t b = 0; b < c.B; ++b) {
    for (int64_t s = 0; s < c.S; ++s) {
      const bool keep = b == 0 ? true : (b == 1 ? false : ((s * 7 + b * 3) % 5) != 0);
      m[size_t(b * c.S + s)] = keep ? 1.0f : 0.0f;
    }
  }
  return from_vector(m, {c.B, c.S}, {.dtype = DType::b8});
}

// Tolerances relative to the largest reference magnitude: both sides compute in f32 from the same
// inputs, so 16-bit results differ by about one rounding of the output dtype.
double rel_tol(DType t) { return t == DType::f32 ? 2e-5 : (t == DType::f16 ? 2e-3 : 1.6e-2); }

void require_near(const Tensor& got, const Tensor& ref, DType dtype, const std::string& what) {
  const std::vector<double> r = testing::to_doubles(ref);
  double scale = 1.0;  // the O(1) input scale floors the error scale (exact zeros are common)
  for (double x : r) {
    if (std::isfinite(x)) scale = std::max(scale, std::fabs(x));
  }
  INFO(what);
  testing::require_close(got, ref, rel_tol(dtype), rel_tol(dtype) * scale);
}

void run_case(const Case& c) {
  INFO(name_of(c));
  const Device gpu = cuda_device();
  AttentionOptions o;
  o.causal = c.causal;
  o.scale = c.scale;
  o.dropout_p = c.dropout;
  o.seed = 1234;
  o.offset = 77;

  const Tensor mask = c.mask ? padding_mask(c) : Tensor();
  const Tensor q = head_input(c, c.T, 1, kCPU), k = head_input(c, c.S, 2, kCPU), v = head_input(c, c.S, 3, kCPU);
  const Tensor go = head_input(c, c.T, 4, kCPU);
  const Tensor qg = head_input(c, c.T, 1, gpu), kg = head_input(c, c.S, 2, gpu), vg = head_input(c, c.S, 3, gpu);
  const Tensor gog = head_input(c, c.T, 4, gpu);
  const Tensor maskg = c.mask ? mask.to(gpu) : Tensor();

  // Forward.
  const Tensor out = empty({c.B, c.H, c.T, c.D}, {.dtype = c.dtype});
  const Tensor lse = empty({c.B, c.H, c.T}, {.dtype = DType::f32});
  kernels::attention_forward(q, k, v, mask, o, out, lse);
  const Tensor outg = empty({c.B, c.H, c.T, c.D}, {.dtype = c.dtype, .device = gpu});
  const Tensor lseg = empty({c.B, c.H, c.T}, {.dtype = DType::f32, .device = gpu});
  kernels::attention_forward(qg, kg, vg, maskg, o, outg, lseg);
  require_near(outg, out, c.dtype, "out");
  {
    INFO("lse");
    testing::require_close(lseg, lse, 1e-5, 1e-5);
  }

  // Backward from the same (CPU) forward results, so the comparison sees only the backward.
  const Tensor dq = empty(q.shape(), {.dtype = c.dtype}), dk = empty(k.shape(), {.dtype = c.dtype}),
               dv = empty(v.shape(), {.dtype = c.dtype});
  kernels::attention_backward(q, k, v, out, lse, go, mask, o, dq, dk, dv);
  const TensorOptions on_gpu{.dtype = c.dtype, .device = gpu};
  // Garbage in the gradients first: the kernels must overwrite, not accumulate.
  const Tensor dqg = full(q.shape(), 3.0, on_gpu), dkg = full(k.shape(), 3.0, on_gpu),
               dvg = full(v.shape(), 3.0, on_gpu);
  kernels::attention_backward(qg, kg, vg, out.to(gpu), lse.to(gpu), gog, maskg, o, dqg, dkg, dvg);
  require_near(dqg, dq, c.dtype, "grad_q");
  require_near(dkg, dk, c.dtype, "grad_k");
  require_near(dvg, dv, c.dtype, "grad_v");
}

}  // namespace

TEST_CASE("cuda attention f32 matches the CPU: causal, masks, odd sizes", "[cuda][attention]") {
  TS_REQUIRE_GPU();
  run_case({.B = 2, .H = 3, .T = 37, .S = 37, .D = 64, .dtype = DType::f32, .causal = true});
  run_case({.B = 3, .H = 2, .T = 45, .S = 70, .D = 32, .dtype = DType::f32, .mask = true});
  run_case({.B = 3, .H = 1, .T = 70, .S = 45, .D = 128, .dtype = DType::f32, .causal = true, .mask = true});
  run_case({.B = 1, .H = 2, .T = 1, .S = 1, .D = 32, .dtype = DType::f32});
  run_case({.B = 2, .H = 2, .T = 64, .S = 96, .D = 64, .dtype = DType::f32, .causal = true, .scale = 0.3f});
}

TEST_CASE("cuda attention dropout draws the CPU's mask", "[cuda][attention]") {
  TS_REQUIRE_GPU();
  run_case({.B = 3, .H = 2, .T = 45, .S = 70, .D = 32, .dtype = DType::f32, .mask = true, .dropout = 0.2f});
  run_case({.B = 2, .H = 2, .T = 33, .S = 33, .D = 64, .dtype = DType::f32, .causal = true, .dropout = 0.5f});
  run_case({.B = 3, .H = 1, .T = 50, .S = 41, .D = 128, .dtype = DType::f32, .causal = true, .mask = true,
            .dropout = 0.1f});
}

TEST_CASE("cuda attention 16-bit floats and strided views", "[cuda][attention]") {
  TS_REQUIRE_GPU();
  run_case({.B = 2, .H = 3, .T = 37, .S = 53, .D = 64, .dtype = DType::f16, .causal = true});
  run_case({.B = 3, .H = 2, .T = 70, .S = 45, .D = 128, .dtype = DType::f16, .mask = true, .dropout = 0.1f});
  run_case({.B = 2, .H = 2, .T = 33, .S = 65, .D = 64, .dtype = DType::bf16, .causal = true, .dropout = 0.1f,
            .strided = true});
  run_case({.B = 3, .H = 2, .T = 40, .S = 40, .D = 32, .dtype = DType::bf16, .mask = true});
  run_case({.B = 2, .H = 3, .T = 29, .S = 31, .D = 32, .dtype = DType::f32, .causal = true, .mask = true,
            .strided = true});
}

TEST_CASE("cuda attention: fully masked rows give zeros and -inf lse", "[cuda][attention]") {
  TS_REQUIRE_GPU();
  const Case c{.B = 2, .H = 1, .T = 5, .S = 7, .D = 32, .dtype = DType::f32, .mask = true};
  const Device gpu = cuda_device();
  Generator gen(9);
  const Tensor q = randn({2, 1, 5, 32}, {.device = gpu}, &gen), k = randn({2, 1, 7, 32}, {.device = gpu}, &gen),
               v = randn({2, 1, 7, 32}, {.device = gpu}, &gen);
  const Tensor out = full({2, 1, 5, 32}, 5.0, {.device = gpu}), lse = full({2, 1, 5}, 5.0, {.device = gpu});
  kernels::attention_forward(q, k, v, padding_mask(c).to(gpu), {}, out, lse);
  const std::vector<double> o = testing::to_doubles(out.select(0, 1)), l = testing::to_doubles(lse.select(0, 1));
  for (double x : o) REQUIRE(x == 0.0);
  for (double x : l) REQUIRE(x == -INFINITY);
  for (double x : testing::to_doubles(lse.select(0, 0))) REQUIRE(std::isfinite(x));
}

TEST_CASE("cuda attention: empty queries zero the key gradients", "[cuda][attention]") {
  TS_REQUIRE_GPU();
  const Device gpu = cuda_device();
  const TensorOptions f32{.device = gpu};
  const Tensor q = zeros({2, 2, 0, 64}, f32), k = ones({2, 2, 5, 64}, f32), v = ones({2, 2, 5, 64}, f32);
  const Tensor out = zeros({2, 2, 0, 64}, f32), lse = zeros({2, 2, 0}, f32);
  kernels::attention_forward(q, k, v, Tensor(), {}, out, lse);
  const Tensor dq = zeros({2, 2, 0, 64}, f32), dk = full({2, 2, 5, 64}, 3.0, f32), dv = full({2, 2, 5, 64}, 3.0, f32);
  kernels::attention_backward(q, k, v, out, lse, out, Tensor(), {}, dq, dk, dv);
  for (double x : testing::to_doubles(dk)) REQUIRE(x == 0.0);
  for (double x : testing::to_doubles(dv)) REQUIRE(x == 0.0);
}

TEST_CASE("cuda attention rejects unsupported head dims", "[cuda][attention]") {
  TS_REQUIRE_GPU();
  const TensorOptions f32{.device = cuda_device()};
  const Tensor q = zeros({1, 1, 4, 48}, f32), out = zeros({1, 1, 4, 48}, f32), lse = zeros({1, 1, 4}, f32);
  REQUIRE_THROWS_WITH(kernels::attention_forward(q, q, q, Tensor(), {}, out, lse),
                      Catch::Contains("head dim of 32, 64 or 128"));
}

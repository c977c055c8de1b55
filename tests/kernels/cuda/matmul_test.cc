// CUDA GEMMs (cuBLASLt) against the CPU kernels on the same inputs: matmul for f32, f16 and bf16
// with odd sizes, batches, broadcast and transposed operands, strides no layout fits, transposed
// and non-contiguous outputs, accumulate, K = 0 and the TF32 opt-in; the fused linear with bias and
// GELU epilogues against the CPU linear. Skips without a GPU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/factory.h"
#include "kernels/cuda/matmul.h"
#include "kernels/kernels.h"
#include "tests/testing/compare.h"
#include "tests/testing/cuda.h"

namespace {

using namespace tessera;

Tensor rand_cpu(const Shape& shape, DType dtype, uint64_t seed) {
  Generator gen(seed);
  return randn(shape, {.dtype = dtype}, &gen);
}

// Both sides accumulate in f32 (in different orders) and round once, so 16-bit results differ by
// about one rounding of the dtype, relative to the largest magnitude.
double rel_tol(DType t) { return t == DType::f32 ? 1e-5 : (t == DType::f16 ? 2e-3 : 1.6e-2); }

void require_near(const Tensor& got, const Tensor& ref, DType dtype) {
  double scale = 1.0;
  for (double x : testing::to_doubles(ref)) scale = std::max(scale, std::fabs(x));
  testing::require_close(got, ref, rel_tol(dtype), rel_tol(dtype) * scale);
}

// The view of a fresh tensor the test hands to matmul: how its inner dims are laid out.
enum class View { dense, transposed, strided };

// A (batch..., R, C) operand with the given layout, as the same values on the CPU and the GPU.
struct Pair {
  Tensor cpu, gpu;
};

Pair make_operand(const Shape& shape, DType dtype, View view, uint64_t seed) {
  const int64_t n = int64_t(shape.size());
  Shape stored = shape;
  if (view == View::transposed) std::swap(stored[size_t(n - 2)], stored[size_t(n - 1)]);
  if (view == View::strided) stored[size_t(n - 1)] *= 2;
  const Tensor base = rand_cpu(stored, dtype, seed);
  auto shape_view = [&](const Tensor& t) {
    if (view == View::transposed) return t.transpose(n - 2, n - 1);
    if (view == View::strided) return t.slice(n - 1, 0, stored[size_t(n - 1)], 2);  // inner stride 2
    return t;
  };
  return {shape_view(base), shape_view(base.to(cuda_device()))};
}

void check_matmul(const Shape& a_shape, const Shape& b_shape, DType dtype, View va, View vb, View vo,
                  bool accumulate) {
  INFO("a " << shape_str(a_shape) << " b " << shape_str(b_shape) << " " << dtype_name(dtype) << " views "
            << int(va) << int(vb) << int(vo) << (accumulate ? " accumulate" : ""));
  const Pair a = make_operand(a_shape, dtype, va, 11), b = make_operand(b_shape, dtype, vb, 12);
  Shape o_shape = a_shape;
  o_shape.back() = b_shape.back();
  for (size_t d = 0; d + 2 < o_shape.size(); ++d) o_shape[d] = std::max(a_shape[d], b_shape[d]);
  // Broadcast batch dims: size-1 operands expand to out's batch shape (stride 0).
  Shape a_full = a_shape, b_full = b_shape;
  for (size_t d = 0; d + 2 < o_shape.size(); ++d) a_full[d] = b_full[d] = o_shape[d];
  const Tensor ac = a.cpu.expand(a_full), ag = a.gpu.expand(a_full);
  const Tensor bc = b.cpu.expand(b_full), bg = b.gpu.expand(b_full);
  const Pair o = make_operand(o_shape, dtype, vo, 13);
  kernels::matmul(ac, bc, o.cpu, accumulate);
  kernels::matmul(ag, bg, o.gpu, accumulate);
  require_near(o.gpu, o.cpu, dtype);
}

}  // namespace

TEST_CASE("cuda matmul matches the CPU for each dtype and layout", "[cuda][matmul]") {
  TS_REQUIRE_GPU();
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    check_matmul({37, 53}, {53, 29}, dt, View::dense, View::dense, View::dense, false);
    check_matmul({37, 53}, {53, 29}, dt, View::transposed, View::dense, View::dense, false);
    check_matmul({37, 53}, {53, 29}, dt, View::dense, View::transposed, View::dense, true);
    check_matmul({37, 53}, {53, 29}, dt, View::transposed, View::transposed, View::transposed, false);
    check_matmul({37, 53}, {53, 29}, dt, View::strided, View::dense, View::strided, true);
    check_matmul({1, 64}, {64, 1}, dt, View::dense, View::dense, View::dense, false);
    check_matmul({128, 256}, {256, 96}, dt, View::dense, View::transposed, View::dense, false);
  }
}

TEST_CASE("cuda matmul batches, broadcasts and accumulates", "[cuda][matmul]") {
  TS_REQUIRE_GPU();
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    check_matmul({2, 3, 17, 33}, {2, 3, 33, 19}, dt, View::dense, View::dense, View::dense, false);
    check_matmul({2, 3, 17, 33}, {1, 1, 33, 19}, dt, View::dense, View::transposed, View::dense, true);
    check_matmul({1, 3, 17, 33}, {2, 3, 33, 19}, dt, View::transposed, View::dense, View::transposed, false);
    check_matmul({4, 9, 40}, {4, 40, 7}, dt, View::strided, View::strided, View::dense, true);
  }
}

TEST_CASE("cuda matmul with K = 0 writes zeros or keeps out", "[cuda][matmul]") {
  TS_REQUIRE_GPU();
  const TensorOptions f32{.device = cuda_device()};
  const Tensor a = zeros({3, 0}, f32), b = zeros({0, 4}, f32);
  const Tensor out = full({3, 4}, 2.0, f32);
  kernels::matmul(a, b, out, /*accumulate=*/true);
  for (double x : testing::to_doubles(out)) REQUIRE(x == 2.0);
  kernels::matmul(a, b, out, /*accumulate=*/false);
  for (double x : testing::to_doubles(out)) REQUIRE(x == 0.0);
}

TEST_CASE("cuda matmul f32 is exact-f32 by default; TF32 is an opt-in", "[cuda][matmul]") {
  TS_REQUIRE_GPU();
  REQUIRE_FALSE(kernels::cuda::allow_tf32());
  // Values whose products need more than TF32's 10 mantissa bits: 1 + 2^-12 squared.
  const double x = 1.0 + std::ldexp(1.0, -12);
  const Tensor a = full({64, 64}, x, {.device = cuda_device()}), b = full({64, 64}, x, {.device = cuda_device()});
  const Tensor out = empty({64, 64}, {.device = cuda_device()});
  kernels::matmul(a, b, out);
  const double exact = 64.0 * x * x;
  for (double v : testing::to_doubles(out)) REQUIRE(std::fabs(v - exact) <= 1e-5 * exact);
  kernels::cuda::set_allow_tf32(true);
  kernels::matmul(a, b, out);
  kernels::cuda::set_allow_tf32(false);
  for (double v : testing::to_doubles(out)) REQUIRE(std::fabs(v - exact) <= 2e-3 * exact);
}

TEST_CASE("cuda linear (bias and GELU epilogues) matches the CPU linear", "[cuda][matmul][linear]") {
  TS_REQUIRE_GPU();
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    for (auto act : {kernels::Activation::none, kernels::Activation::gelu_tanh}) {
      for (bool with_bias : {false, true}) {
        for (bool views : {false, true}) {
          INFO(dtype_name(dt) << " gelu " << (act == kernels::Activation::gelu_tanh) << " bias " << with_bias
                              << " views " << views);
          const int64_t m = 45, k = 67, n = 38;
          // views: x a transposed view, w with inner stride 2, out transposed.
          const Pair x = make_operand({m, k}, dt, views ? View::transposed : View::dense, 21);
          const Pair w = make_operand({n, k}, dt, views ? View::strided : View::dense, 22);
          const Pair bias = with_bias ? make_operand({n}, dt, View::dense, 23) : Pair{};
          const Pair out = make_operand({m, n}, dt, views ? View::transposed : View::dense, 24);
          kernels::linear(x.cpu, w.cpu, bias.cpu, act, out.cpu);
          kernels::linear(x.gpu, w.gpu, bias.gpu, act, out.gpu);
          require_near(out.gpu, out.cpu, dt);
        }
      }
    }
  }
}

TEST_CASE("cuda linear with K = 0 is act(bias)", "[cuda][matmul][linear]") {
  TS_REQUIRE_GPU();
  const Device gpu = cuda_device();
  const Tensor x = zeros({3, 0}, {.device = gpu}), w = zeros({5, 0}, {.device = gpu});
  const Tensor bias_cpu = from_vector(std::vector<float>{-2, -1, 0, 1, 2}, {5});
  const Tensor out_cpu = empty({3, 5}), out = full({3, 5}, 9.0, {.device = gpu});
  kernels::linear(zeros({3, 0}), zeros({5, 0}), bias_cpu, kernels::Activation::gelu_tanh, out_cpu);
  kernels::linear(x, w, bias_cpu.to(gpu), kernels::Activation::gelu_tanh, out);
  testing::require_close(out, out_cpu, 1e-6, 1e-7);
}

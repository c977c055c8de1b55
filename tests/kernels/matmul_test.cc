// Tests for the CPU matmul against a double reference: 2-D, batched, broadcast and unevenly strided
// batches, transposed and strided views of every operand, odd and degenerate sizes, accumulate,
// and 16-bit floats.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <vector>

#include "core/factory.h"
#include "kernels/cpu/matmul.h"

namespace {

using namespace tessera;

std::vector<double> values(const Tensor& t) {
  Tensor c = t.to(DType::f32).contiguous();
  const float* p = c.data<float>();
  return std::vector<double>(p, p + c.numel());
}

Tensor randn_of(const Shape& shape, uint64_t seed, DType dtype = DType::f32) {
  Generator gen(seed);
  return randn(shape, {.dtype = dtype}, &gen);
}

// Checks out == a @ b (+ before, when accumulating) elementwise, with a tolerance scaled by
// sum_k |a_ik b_kj| so rounding in long dot products is allowed for.
void check_matmul(const Tensor& a, const Tensor& b, const Tensor& out, const std::vector<double>& before,
                  bool accumulate, double rel_tol) {
  const int64_t nd = a.dim();
  const int64_t m = a.size(nd - 2), k = a.size(nd - 1), n = b.size(nd - 1);
  const int64_t batch = out.numel() / (m * n);
  const std::vector<double> va = values(a), vb = values(b), vc = values(out);
  int64_t bad = 0;
  for (int64_t i = 0; i < batch; ++i) {
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t c = 0; c < n; ++c) {
        double ref = 0.0, mag = 0.0;
        for (int64_t x = 0; x < k; ++x) {
          const double prod = va[(i * m + r) * k + x] * vb[(i * k + x) * n + c];
          ref += prod;
          mag += std::abs(prod);
        }
        const int64_t idx = (i * m + r) * n + c;
        if (accumulate) {
          ref += before[idx];
          mag += std::abs(before[idx]);
        }
        if (!(std::abs(vc[idx] - ref) <= rel_tol * (1.0 + mag))) ++bad;
      }
    }
  }
  CHECK(bad == 0);
}

void run_case(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate = false,
              double rel_tol = 2e-6) {
  if (accumulate) out.copy_(randn_of(out.shape(), 99));
  const std::vector<double> before = values(out);
  kernels::cpu::matmul(a, b, out, accumulate);
  check_matmul(a, b, out, before, accumulate, rel_tol);
}

Tensor out_for(const Tensor& a, const Tensor& b, DType dtype = DType::f32) {
  Shape s = a.shape();
  s.back() = b.shape().back();
  return full(s, 777.0, {.dtype = dtype});  // garbage that must be overwritten
}

}  // namespace

TEST_CASE("matmul 2-D with odd sizes", "[matmul]") {
  for (auto [m, k, n] : std::vector<std::array<int64_t, 3>>{
           {37, 53, 29}, {1, 1, 1}, {1, 17, 5}, {9, 1, 13}, {6, 40, 1}, {130, 70, 65}}) {
    INFO("m=" << m << " k=" << k << " n=" << n);
    Tensor a = randn_of({m, k}, 1), b = randn_of({k, n}, 2);
    run_case(a, b, out_for(a, b));
  }
}

TEST_CASE("matmul with K == 0 writes zeros or keeps out", "[matmul]") {
  Tensor a = randn_of({4, 0}, 1), b = randn_of({0, 3}, 2);
  Tensor out = out_for(a, b);
  kernels::cpu::matmul(a, b, out);
  for (double v : values(out)) CHECK(v == 0.0);
  run_case(a, b, out, /*accumulate=*/true);
}

TEST_CASE("matmul batched and accumulate", "[matmul]") {
  Tensor a = randn_of({3, 4, 17, 9}, 3), b = randn_of({3, 4, 9, 23}, 4);
  run_case(a, b, out_for(a, b));
  run_case(a, b, out_for(a, b), /*accumulate=*/true);
}

TEST_CASE("matmul broadcast batch (stride 0)", "[matmul]") {
  Tensor a = randn_of({2, 1, 11, 7}, 5).expand({2, 3, 11, 7});
  Tensor b = randn_of({1, 3, 7, 5}, 6).expand({2, 3, 7, 5});
  run_case(a, b, out_for(a, b));
  Tensor w = randn_of({7, 5}, 7).unsqueeze(0).expand({6, 7, 5});  // a shared weight
  Tensor x = randn_of({6, 11, 7}, 8);
  run_case(x, w, out_for(x, w), /*accumulate=*/true);
}

TEST_CASE("matmul transposed views of a, b and out", "[matmul]") {
  Tensor at = randn_of({2, 19, 13}, 9).transpose(1, 2);  // (2, 13, 19), inner stride != 1
  Tensor bt = randn_of({2, 21, 19}, 10).transpose(1, 2);  // (2, 19, 21)
  Tensor a = randn_of({2, 13, 19}, 11), b = randn_of({2, 19, 21}, 12);
  run_case(at, b, out_for(at, b));
  run_case(a, bt, out_for(a, bt));
  run_case(at, bt, out_for(at, bt), /*accumulate=*/true);
  Tensor out_t = full({2, 21, 13}, 5.0).transpose(1, 2);  // out stored column-major
  run_case(at, bt, out_t);
  run_case(a, b, out_t, /*accumulate=*/true);
}

TEST_CASE("matmul strided views that need copies or loops", "[matmul]") {
  // Inner stride 2: sgemm cannot read it, so it is copied.
  Tensor a = randn_of({8, 30}, 13).slice(1, 0, 30, 2);  // (8, 15)
  Tensor b = randn_of({15, 6}, 14);
  run_case(a, b, out_for(a, b));
  // Batch dims that do not merge into one stride: looped over.
  Tensor a4 = randn_of({3, 5, 6, 4}, 15).slice(1, 0, 5, 2);  // (3, 3, 6, 4)
  Tensor b4 = randn_of({3, 3, 4, 7}, 16);
  run_case(a4, b4, out_for(a4, b4));
  // out a strided slice of a larger buffer, with a padded leading dimension.
  Tensor big = full({3, 3, 6, 10}, 1.0);
  run_case(a4, b4, big.narrow(3, 2, 7), /*accumulate=*/true);
  for (double v : values(big.narrow(3, 0, 2))) CHECK(v == 1.0);
  // out with inner stride 2: computed densely, then scattered.
  Tensor wide = full({6, 14}, 3.0);
  Tensor out2 = wide.slice(1, 0, 14, 2);  // (6, 7)
  Tensor a2 = randn_of({6, 4}, 17), b2 = randn_of({4, 7}, 18);
  run_case(a2, b2, out2, /*accumulate=*/true);
  for (double v : values(wide.slice(1, 1, 14, 2))) CHECK(v == 3.0);
}

TEST_CASE("matmul f16 and bf16 compute in f32", "[matmul]") {
  for (DType dt : {DType::f16, DType::bf16}) {
    Tensor a = randn_of({2, 9, 33}, 19, dt), b = randn_of({2, 33, 12}, 20, dt);
    Tensor out = out_for(a, b, dt);
    kernels::cpu::matmul(a, b, out);
    CHECK(out.dtype() == dt);
    check_matmul(a, b, out, {}, false, dt == DType::f16 ? 2e-3 : 1e-2);
    Tensor bb = randn_of({1, 33, 12}, 21, dt).expand({2, 33, 12});
    run_case(a, bb, out, /*accumulate=*/true, dt == DType::f16 ? 2e-3 : 1e-2);
  }
}

TEST_CASE("matmul rejects mismatched shapes and dtypes", "[matmul]") {
  Tensor a = randn_of({4, 5}, 1), b = randn_of({6, 3}, 2);
  CHECK_THROWS_AS(kernels::cpu::matmul(a, b, zeros({4, 3})), ValueError);
  Tensor b2 = randn_of({5, 3}, 2);
  CHECK_THROWS_AS(kernels::cpu::matmul(a, b2, zeros({4, 3}, {.dtype = DType::f16})), ValueError);
  CHECK_THROWS_AS(kernels::cpu::matmul(a, b2, zeros({4, 4})), ValueError);
}

// Tests for the CPU SGEMM against a double-precision reference: every transpose combination,
// alpha/beta, ragged and degenerate sizes, padded leading dimensions, threading paths and batching,
// each on every micro-kernel ISA this host can run.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_microkernel.h"

namespace {

using tessera::kernels::cpu::detail::GemmIsa;

constexpr float kSentinel = 12345.0f;  // fills leading-dimension padding, which must survive

std::vector<GemmIsa> host_isas() {
  std::vector<GemmIsa> isas{GemmIsa::kAvx2};
  if (tessera::kernels::cpu::cpu_has_avx512()) isas.push_back(GemmIsa::kAvx512);
  return isas;
}

const char* isa_name(GemmIsa isa) { return isa == GemmIsa::kAvx512 ? "avx512" : "avx2"; }

struct Shape {
  bool trans_a = false, trans_b = false;
  int64_t m = 1, n = 1, k = 1;
  float alpha = 1.0f, beta = 0.0f;
  int64_t pad = 0;      // extra columns in every leading dimension
  bool bias = false;    // a random (N) bias added to every row
};

// A stored row-major matrix with its leading dimension; padding holds kSentinel.
struct Stored {
  int64_t rows, cols, ld;
  std::vector<float> data;

  float at(int64_t r, int64_t c) const { return data[r * ld + c]; }
};

Stored random_stored(int64_t rows, int64_t cols, int64_t pad, std::mt19937& rng) {
  Stored s{rows, cols, cols + pad, {}};
  s.data.assign(std::max<int64_t>(1, rows * s.ld), kSentinel);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) s.data[r * s.ld + c] = dist(rng);
  }
  return s;
}

// op(X)(r, c) of a stored matrix.
float op_at(const Stored& x, bool trans, int64_t r, int64_t c) {
  return trans ? x.at(c, r) : x.at(r, c);
}

// Checks got == alpha * op(A) op(B) + beta * c0 (+ bias) within fp32 rounding that grows like
// sqrt(K), relative to the magnitude of the terms summed; padding columns must be untouched.
void check_product(const Shape& s, const Stored& a, const Stored& b, const Stored& c0,
                   const Stored& got, const std::vector<float>& bias = {}) {
  const double tol = 1e-5 * std::sqrt(static_cast<double>(std::max<int64_t>(s.k, 1)));
  for (int64_t i = 0; i < s.m; ++i) {
    for (int64_t j = 0; j < s.n; ++j) {
      double sum = 0.0, magnitude = 0.0;
      for (int64_t p = 0; p < s.k; ++p) {
        const double term = double(op_at(a, s.trans_a, i, p)) * op_at(b, s.trans_b, p, j);
        sum += term;
        magnitude += std::abs(term);
      }
      double want = s.alpha * sum;
      magnitude *= std::abs(s.alpha);
      if (s.beta != 0.0f) {
        want += double(s.beta) * c0.at(i, j);
        magnitude += std::abs(double(s.beta) * c0.at(i, j));
      }
      if (!bias.empty()) {
        want += bias[size_t(j)];
        magnitude += std::abs(bias[size_t(j)]);
      }
      const double err = std::abs(got.at(i, j) - want);
      if (!(err <= tol * magnitude + 1e-30)) {
        FAIL("C(" << i << ", " << j << ") = " << got.at(i, j) << ", want " << want);
      }
    }
    for (int64_t j = s.n; j < got.ld; ++j) REQUIRE(got.at(i, j) == kSentinel);
  }
}

// Runs one product on one ISA, with C preset to random values, or to NaN when beta == 0.
void run_shape(GemmIsa isa, const Shape& s, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  const Stored a = s.trans_a ? random_stored(s.k, s.m, s.pad, rng)
                             : random_stored(s.m, s.k, s.pad, rng);
  const Stored b = s.trans_b ? random_stored(s.n, s.k, s.pad, rng)
                             : random_stored(s.k, s.n, s.pad, rng);
  Stored c = random_stored(s.m, s.n, s.pad, rng);
  if (s.beta == 0.0f) {
    for (int64_t i = 0; i < s.m; ++i) {
      std::fill_n(&c.data[i * c.ld], s.n, std::numeric_limits<float>::quiet_NaN());
    }
  }
  const Stored c0 = c;
  std::vector<float> bias;
  if (s.bias) bias = random_stored(1, s.n, 0, rng).data;
  tessera::kernels::cpu::detail::sgemm_batched_with_isa(
      isa, s.trans_a, s.trans_b, 1, s.m, s.n, s.k, s.alpha, a.data.data(), a.ld, 0, b.data.data(),
      b.ld, 0, s.beta, c.data.data(), c.ld, 0, s.bias ? bias.data() : nullptr);
  check_product(s, a, b, c0, c, bias);
}

std::string describe(GemmIsa isa, const Shape& s) {
  return std::string(isa_name(isa)) + (s.trans_a ? " A^T" : " A") + (s.trans_b ? " B^T" : " B") +
         " M=" + std::to_string(s.m) + " N=" + std::to_string(s.n) + " K=" + std::to_string(s.k) +
         " alpha=" + std::to_string(s.alpha) + " beta=" + std::to_string(s.beta) +
         " pad=" + std::to_string(s.pad) + (s.bias ? " bias" : "");
}

// Runs each (m, n, k) of `sizes` on every host ISA in all four transpose layouts, with the given
// scalars and padding; `bias_layout` (0-3, or -1 for none) is the layout that also adds a bias.
void run_layouts(const std::vector<std::array<int64_t, 3>>& sizes, float alpha, float beta,
                 int64_t pad, uint32_t seed, int bias_layout = -1) {
  for (GemmIsa isa : host_isas()) {
    for (const auto& size : sizes) {
      for (int t = 0; t < 4; ++t) {
        const Shape s{(t & 1) != 0, (t & 2) != 0, size[0], size[1], size[2], alpha, beta, pad,
                      t == bias_layout};
        INFO(describe(isa, s));
        run_shape(isa, s, seed + static_cast<uint32_t>(t));
      }
    }
  }
}

}  // namespace

TEST_CASE("sgemm matches the reference on odd sizes, all transposes, alpha and beta", "[gemm]") {
  const int64_t sizes[][3] = {{1, 1, 1},    {7, 13, 5},  {33, 65, 17}, {129, 1, 300},
                              {1, 77, 40},  {50, 1, 9},  {8, 48, 8},   {6, 16, 7},
                              {17, 49, 33}, {3, 200, 1}, {64, 96, 385}};
  const float scalars[][2] = {{1.0f, 0.0f}, {1.0f, 1.0f}, {-0.5f, 2.0f}, {2.0f, 0.0f}};
  for (GemmIsa isa : host_isas()) {
    for (const auto& size : sizes) {
      for (int t = 0; t < 4; ++t) {
        for (const auto& scalar : scalars) {
          Shape s{(t & 1) != 0, (t & 2) != 0, size[0], size[1], size[2], scalar[0], scalar[1], 0};
          for (int64_t pad : {0, 3}) {
            s.pad = pad;
            INFO(describe(isa, s));
            run_shape(isa, s);
          }
        }
      }
    }
  }
}

TEST_CASE("sgemm with K == 0 or alpha == 0 only scales C", "[gemm]") {
  for (GemmIsa isa : host_isas()) {
    for (float beta : {0.0f, 0.5f}) {
      for (Shape s : {Shape{false, false, 9, 11, 0, 1.0f, beta, 2},
                      Shape{true, true, 9, 11, 5, 0.0f, beta, 1}}) {
        INFO(describe(isa, s));
        run_shape(isa, s);
      }
    }
  }
}

// The linear layer's forward: the bias joins the first k-block's store, on every tile (ragged edges
// included), every thread's share and every batch entry, and when there is nothing to multiply.
TEST_CASE("sgemm adds a bias to every row", "[gemm]") {
  const int64_t sizes[][3] = {{7, 13, 5}, {33, 65, 17}, {8, 48, 8}, {1, 77, 40}, {17, 49, 600}, {9, 11, 0}};
  const float scalars[][2] = {{1.0f, 0.0f}, {-0.5f, 2.0f}, {0.0f, 0.5f}};
  for (GemmIsa isa : host_isas()) {
    for (const auto& size : sizes) {
      for (int t = 0; t < 4; ++t) {
        for (const auto& scalar : scalars) {
          Shape s{(t & 1) != 0, (t & 2) != 0, size[0], size[1], size[2], scalar[0], scalar[1], 2, true};
          INFO(describe(isa, s));
          run_shape(isa, s, static_cast<uint32_t>(t + 3));
        }
      }
    }
    // Both threads' shares and several k-blocks (the reference is costly: two layouts only).
    for (int t : {0, 3}) {
      Shape s{(t & 1) != 0, (t & 2) != 0, 90, 500, 1000, -0.5f, 2.0f, 2, true};
      INFO(describe(isa, s));
      run_shape(isa, s, static_cast<uint32_t>(t + 3));
    }
  }

  // Every product of a batch, and the public entry point.
  using tessera::kernels::cpu::detail::sgemm_batched_with_isa;
  const int64_t batch = 3, m = 20, n = 50, k = 30;
  std::mt19937 rng(5);
  const Stored a = random_stored(m, k, 0, rng), b = random_stored(k, n, 0, rng);
  const std::vector<float> bias = random_stored(1, n, 0, rng).data;
  const Shape s{false, false, m, n, k, 1.0f, 0.0f, 0, true};
  for (GemmIsa isa : host_isas()) {
    INFO(isa_name(isa));
    std::vector<float> c(size_t(batch * m * n), std::numeric_limits<float>::quiet_NaN());
    sgemm_batched_with_isa(isa, false, false, batch, m, n, k, 1.0f, a.data.data(), k, 0,
                           b.data.data(), n, 0, 0.0f, c.data(), n, m * n, bias.data());
    for (int64_t q = 0; q < batch; ++q) {
      Stored got{m, n, n, std::vector<float>(c.begin() + q * m * n, c.begin() + (q + 1) * m * n)};
      check_product(s, a, b, got, got, bias);
    }
  }
  Stored got{m, n, n, std::vector<float>(size_t(m * n), std::numeric_limits<float>::quiet_NaN())};
  tessera::kernels::cpu::sgemm_batched(false, false, 1, m, n, k, 1.0f, a.data.data(), k, 0,
                                       b.data.data(), n, 0, 0.0f, got.data.data(), n, 0, bias.data());
  check_product(s, a, b, got, got, bias);
}

TEST_CASE("sgemm threaded paths: a shared A block, rows or columns owned, several k and m blocks",
          "[gemm]") {
  // With two threads: threads own columns where packing A costs less than packing B (256 x 768,
  // 90 x 500, and 1100 x 2400 over two m-blocks), rows where it does not (2100 x 200, 300 x 40),
  // and share one A block where the rows are too few (20 x 700).
  run_layouts({{256, 768, 300}, {300, 40, 500}, {2100, 200, 16},
               {90, 500, 1000}, {20, 700, 400}, {1100, 2400, 24}},
              0.75f, -1.0f, 5, 7);
}

TEST_CASE("sgemm widths that are multiples of 64 but not of 48 (AVX-512's 6 x 64 tiles)",
          "[gemm]") {
  // Attention's head dim 64, 128-wide and 320-wide C (two threads, rows or a shared A block),
  // ragged row counts, and depth over two k-blocks.
  run_layouts({{96, 64, 64}, {7, 64, 33}, {50, 128, 9}, {13, 320, 70}, {200, 128, 1500}, {1, 64, 1}},
              0.5f, 1.0f, 2, 11, /*bias_layout=*/1);
}

TEST_CASE("sgemm_batched handles broadcast inputs and a shared accumulating C", "[gemm]") {
  using tessera::kernels::cpu::detail::sgemm_batched_with_isa;
  const int64_t batch = 4, m = 64, n = 72, k = 64, lda = k + 2, ldb = n + 1, ldc = n + 3;
  std::mt19937 rng(3);
  const Stored a = random_stored(m, k, 2, rng);  // broadcast to every product
  std::vector<Stored> bs, cs;
  for (int64_t i = 0; i < batch; ++i) bs.push_back(random_stored(k, n, 1, rng));
  for (int64_t i = 0; i < batch; ++i) cs.push_back(random_stored(m, n, 3, rng));
  std::vector<float> b_all, c_all;
  for (const Stored& b : bs) b_all.insert(b_all.end(), b.data.begin(), b.data.end());
  for (const Stored& c : cs) c_all.insert(c_all.end(), c.data.begin(), c.data.end());
  const int64_t stride_b = k * ldb, stride_c = m * ldc;

  for (GemmIsa isa : host_isas()) {
    INFO(isa_name(isa));
    SECTION("independent outputs") {
      std::vector<float> c = c_all;
      sgemm_batched_with_isa(isa, false, false, batch, m, n, k, 1.5f, a.data.data(), lda, 0,
                             b_all.data(), ldb, stride_b, 0.5f, c.data(), ldc, stride_c);
      const Shape s{false, false, m, n, k, 1.5f, 0.5f, 3};
      for (int64_t i = 0; i < batch; ++i) {
        Stored got = cs[i];
        std::memcpy(got.data.data(), c.data() + i * stride_c, sizeof(float) * stride_c);
        check_product(s, a, bs[i], cs[i], got);
      }
    }
    SECTION("stride_c == 0 accumulates the products in order") {
      Stored c = cs[0];
      sgemm_batched_with_isa(isa, false, false, batch, m, n, k, 1.0f, a.data.data(), lda, 0,
                             b_all.data(), ldb, stride_b, 1.0f, c.data.data(), ldc, 0);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double want = cs[0].at(i, j);
          for (int64_t q = 0; q < batch; ++q) {
            for (int64_t p = 0; p < k; ++p) want += double(a.at(i, p)) * bs[q].at(p, j);
          }
          REQUIRE(std::abs(c.at(i, j) - want) <= 1e-4 * std::sqrt(double(batch * k)));
        }
      }
    }
  }
}

TEST_CASE("sgemm public entry points dispatch and validate", "[gemm]") {
  using namespace tessera::kernels::cpu;
  const std::string isa = sgemm_isa();
  CHECK((isa == "avx512" || isa == "avx2"));
  CHECK((isa == "avx512") == cpu_has_avx512());

  float a[6] = {1, 2, 3, 4, 5, 6};  // (2, 3)
  float b[6] = {1, 0, 0, 1, 1, 1};  // (3, 2)
  float c[4] = {-1, -1, -1, -1};
  sgemm(false, false, 2, 2, 3, 1.0f, a, 3, b, 2, 0.0f, c, 2);
  CHECK(c[0] == 4);
  CHECK(c[1] == 5);
  CHECK(c[2] == 10);
  CHECK(c[3] == 11);

  CHECK_THROWS_AS(sgemm(false, false, 2, 2, 3, 1.0f, a, 2, b, 2, 0.0f, c, 2), tessera::ValueError);
  CHECK_THROWS_AS(sgemm(false, false, -1, 2, 3, 1.0f, a, 3, b, 2, 0.0f, c, 2), tessera::ValueError);
  CHECK_THROWS_AS(sgemm(false, true, 2, 2, 3, 1.0f, a, 3, b, 2, 0.0f, c, 2), tessera::ValueError);
}

// CUDA layer norm against the CPU kernel: outputs, saved statistics and all three gradients, for
// f32/f16/bf16, odd sizes, both launch shapes (a warp per row up to 1024 channels, a block above),
// non-contiguous inputs and outputs.
#include <catch2/catch.hpp>
#include <cmath>

#include "core/factory.h"
#include "kernels/kernels.h"
#include "tests/testing/compare.h"
#include "tests/testing/cuda.h"

using namespace tessera;
using testing::require_close;

namespace {

Tensor gpu(const Tensor& t) { return t.defined() ? t.to(cuda_device()) : t; }

// Tolerance of a T-rounded output whose f32 value the two backends compute in different orders.
double out_tol(DType t) { return t == DType::bf16 ? 1.6e-2 : t == DType::f16 ? 2e-3 : 2e-5; }

struct Case {
  Shape shape;  // x's shape; the last dim is C
  DType dtype;
  bool affine;
  bool transposed;  // x and grad_y as transposed views of (C, rows) buffers (2-D shapes only)
};

// x of `shape` on the CPU and the same values on the GPU, both non-contiguous when `transposed`.
std::pair<Tensor, Tensor> input(const Shape& shape, DType dt, bool transposed, uint64_t seed) {
  Generator gen(seed);
  if (!transposed) {
    Tensor c = randn(shape, {.dtype = dt}, &gen);
    return {c, gpu(c)};
  }
  Tensor base = randn({shape[1], shape[0]}, {.dtype = dt}, &gen);
  return {base.transpose(0, 1), gpu(base).transpose(0, 1)};
}

void run_case(const Case& c) {
  INFO("shape " << shape_str(c.shape) << " " << dtype_name(c.dtype) << " affine " << c.affine
                << " transposed " << c.transposed);
  const int64_t C = c.shape.back();
  const int64_t rows = shape_numel(c.shape) / C;
  Generator gen(7);
  const Tensor w = c.affine ? randn({C}, {}, &gen) : Tensor();
  const Tensor b = c.affine ? randn({C}, {}, &gen) : Tensor();
  auto [x, xg] = input(c.shape, c.dtype, c.transposed, 11);
  auto [gy, gyg] = input(c.shape, c.dtype, c.transposed, 12);
  const double eps = 1e-5;

  // CPU reference.
  const Tensor y = empty(c.shape, {.dtype = c.dtype}), mean = empty({rows}), rstd = empty({rows});
  kernels::layer_norm(x, w, b, eps, y, mean, rstd);
  const Tensor gx = empty(c.shape, {.dtype = c.dtype});
  const Tensor gw = c.affine ? empty({C}) : Tensor(), gb = empty({C});
  kernels::layer_norm_backward(gy, x, w, mean, rstd, gx, gw, gb);

  // GPU, statistics written into a strided view to exercise the scratch-and-copy path.
  const TensorOptions on_gpu{.dtype = c.dtype, .device = cuda_device()};
  const TensorOptions f32_gpu{.dtype = DType::f32, .device = cuda_device()};
  const Tensor yg = empty(c.shape, on_gpu);
  const Tensor mean_g = empty({rows, 2}, f32_gpu).select(1, 1), rstd_g = empty({rows}, f32_gpu);
  kernels::layer_norm(xg, gpu(w), gpu(b), eps, yg, mean_g, rstd_g);
  require_close(mean_g, mean, 1e-5, 1e-5);
  require_close(rstd_g, rstd, 1e-5, 1e-5);
  require_close(yg, y, out_tol(c.dtype), out_tol(c.dtype));

  const Tensor gxg = empty(c.shape, on_gpu);
  const Tensor gwg = c.affine ? empty({C}, f32_gpu) : Tensor();
  const Tensor gbg = empty({C}, {.dtype = DType::bf16, .device = cuda_device()});  // any dtype
  kernels::layer_norm_backward(gyg, xg, gpu(w), mean_g, rstd_g, gxg, gwg, gbg);
  // grad_x is O(1) per element; grad_weight / grad_bias sum `rows` O(1) terms in f32.
  require_close(gxg, gx, 4 * out_tol(c.dtype), 4 * out_tol(c.dtype));
  if (c.affine) require_close(gwg, gw, 1e-4, 1e-5 * double(rows));
  require_close(gbg, gb.to(DType::bf16), 8e-3, 1e-5 * double(rows));
}

}  // namespace

TEST_CASE("cuda layer_norm matches the CPU on odd shapes and every floating dtype") {
  TS_REQUIRE_GPU();
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    run_case({{1, 1}, dt, true, false});
    run_case({{7, 33}, dt, true, false});
    run_case({{3, 5, 17}, dt, false, false});
    run_case({{65, 1000}, dt, true, true});   // warp per row, transposed input
    run_case({{5, 1537}, dt, true, false});   // block per row
    run_case({{9, 4099}, dt, false, true});   // block per row, no affine, transposed
    run_case({{1100, 40}, dt, true, false});  // many rows: several chunks of parameter partials
  }
}

TEST_CASE("cuda layer_norm keeps constant rows finite and handles empty inputs") {
  TS_REQUIRE_GPU();
  const TensorOptions f32_gpu{.dtype = DType::f32, .device = cuda_device()};
  // A constant row has zero variance: rstd = 1/sqrt(eps), y = bias.
  const Tensor x = full({3, 50}, 2.5, f32_gpu), w = ones({50}, f32_gpu), b = full({50}, 0.25, f32_gpu);
  const Tensor y = empty({3, 50}, f32_gpu), mean = empty({3}, f32_gpu), rstd = empty({3}, f32_gpu);
  kernels::layer_norm(x, w, b, 1e-5, y, mean, rstd);
  require_close(mean, full({3}, 2.5), 1e-6, 0.0);
  require_close(rstd, full({3}, 1.0 / std::sqrt(1e-5)), 1e-4, 0.0);
  require_close(y, full({3, 50}, 0.25), 0.0, 1e-6);

  // No rows: nothing to normalise, parameter gradients are zero.
  const Tensor e = empty({0, 8}, f32_gpu), s = empty({0}, f32_gpu);
  kernels::layer_norm(e, Tensor(), Tensor(), 1e-5, empty({0, 8}, f32_gpu), s, s);
  const Tensor gw = full({8}, 3.0, f32_gpu), gb = full({8}, 3.0, f32_gpu);
  kernels::layer_norm_backward(e, e, Tensor(), s, s, empty({0, 8}, f32_gpu), gw, gb);
  require_close(gw, zeros({8}), 0.0, 0.0);
  require_close(gb, zeros({8}), 0.0, 0.0);
}

TEST_CASE("cuda layer_norm rejects mismatched statistics with the shapes in the message") {
  TS_REQUIRE_GPU();
  const TensorOptions f32_gpu{.dtype = DType::f32, .device = cuda_device()};
  const Tensor x = zeros({4, 6}, f32_gpu);
  CHECK_THROWS_WITH(kernels::layer_norm(x, Tensor(), Tensor(), 1e-5, empty({4, 6}, f32_gpu),
                                        empty({3}, f32_gpu), empty({4}, f32_gpu)),
                    Catch::Contains("mean") && Catch::Contains("4 elements"));
}

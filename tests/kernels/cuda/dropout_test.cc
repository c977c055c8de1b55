// CUDA dropout against the CPU kernel: the same (seed, offset) gives the identical output bit for
// bit (so the identical mask), for every floating dtype, odd sizes, offsets past 2^32, strided
// inputs and outputs, and in place.
#include <catch2/catch.hpp>
#include <cmath>

#include "core/factory.h"
#include "kernels/kernels.h"
#include "tests/testing/compare.h"
#include "tests/testing/cuda.h"

using namespace tessera;
using testing::require_close;
using testing::to_doubles;

namespace {

Tensor gpu(const Tensor& t) { return t.to(cuda_device()); }

void run_case(const Shape& shape, DType dt, double p, uint64_t seed, uint64_t offset) {
  INFO("shape " << shape_str(shape) << " " << dtype_name(dt) << " p " << p << " seed " << seed
                << " offset " << offset);
  Generator gen(seed + 1);
  const Tensor x = randn(shape, {.dtype = dt}, &gen);
  const Tensor out = empty(shape, {.dtype = dt});
  kernels::dropout(x, p, seed, offset, out);
  const Tensor out_g = empty(shape, {.dtype = dt, .device = cuda_device()});
  kernels::dropout(gpu(x), p, seed, offset, out_g);
  require_close(out_g, out, 0.0, 0.0);  // bit for bit

  // The mask is not degenerate: about a fraction p of the elements is dropped.
  const std::vector<double> v = to_doubles(out_g), xv = to_doubles(x);
  int64_t dropped = 0;
  for (size_t i = 0; i < v.size(); ++i) dropped += (v[i] == 0.0 && xv[i] != 0.0);
  const double n = double(v.size());
  if (n >= 10000) CHECK(std::abs(double(dropped) / n - p) < 0.02);
}

}  // namespace

TEST_CASE("cuda dropout draws the CPU's mask bit for bit") {
  TS_REQUIRE_GPU();
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    run_case({1}, dt, 0.5, 3, 0);
    run_case({1001, 37}, dt, 0.1, 1234, 0);
    run_case({3, 7, 513}, dt, 0.5, 42, 17);
    run_case({20011}, dt, 0.3, 7, (uint64_t(1) << 32) - 5000);  // the counter crosses 2^32
    run_case({999}, dt, 0.0, 5, 9);                              // keeps everything
    run_case({999}, dt, 1.0, 5, 9);                              // drops everything
  }
}

TEST_CASE("cuda dropout handles strided views, in-place use and empty tensors") {
  TS_REQUIRE_GPU();
  Generator gen(3);
  const Tensor base = randn({129, 65}, {}, &gen);
  const Tensor x = base.transpose(0, 1);  // (65, 129), not contiguous
  const Tensor out = empty({65, 129});
  kernels::dropout(x, 0.25, 77, 1000, out);

  // Non-contiguous input and output on the GPU.
  const Tensor out_g = empty({129, 65}, {.device = cuda_device()}).transpose(0, 1);
  kernels::dropout(gpu(base).transpose(0, 1), 0.25, 77, 1000, out_g);
  require_close(out_g, out, 0.0, 0.0);

  // In place: out is x.
  const Tensor xg = gpu(x.contiguous());
  kernels::dropout(xg, 0.25, 77, 1000, xg);
  require_close(xg, out, 0.0, 0.0);

  // A different offset draws a different mask.
  const Tensor other = empty({65, 129}, {.device = cuda_device()});
  kernels::dropout(gpu(x), 0.25, 77, 1001, other);
  const std::vector<double> a = to_doubles(other), b = to_doubles(out);
  int differ = 0;
  for (size_t i = 0; i < a.size(); ++i) differ += (a[i] != b[i]);
  CHECK(differ > 100);

  const Tensor e = empty({0, 4}, {.device = cuda_device()});
  kernels::dropout(e, 0.5, 1, 2, e);
  CHECK(e.numel() == 0);
  CHECK_THROWS_WITH(kernels::dropout(gpu(x), 1.5, 1, 2, empty({65, 129}, {.device = cuda_device()})),
                    Catch::Contains("expected p in [0, 1]"));
}

// CUDA gather / scatter_add against the CPU: every dim of a 3-d tensor, index shapes smaller than
// the tensors, transposed operands, every dtype, heavy collisions in scatter_add (exact for
// integers; f16/bf16 accumulate in f32 and round once), and bad index values that must throw
// without writing anything.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "core/factory.h"
#include "kernels/kernels.h"
#include "tests/testing/compare.h"
#include "tests/testing/cuda.h"

using namespace tessera;
using testing::require_close;

namespace {

Tensor gpu(const Tensor& t) { return t.to(cuda_device()); }

Tensor values_of(const Shape& shape, DType dt, uint64_t seed) {
  Generator gen(seed);
  // Small integers are exact in every dtype, so sums of a few of them are exact too.
  return randint(-8, 9, shape, {.dtype = DType::i64}, &gen).to(dt);
}

Tensor index_of(const Shape& shape, int64_t bound, uint64_t seed) {
  Generator gen(seed);
  return randint(0, bound, shape, {.dtype = DType::i64}, &gen);
}

}  // namespace

TEST_CASE("cuda gather matches the CPU for every dim and dtype") {
  TS_REQUIRE_GPU();
  const Shape xs{4, 5, 6};
  for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64, DType::b8}) {
    const Tensor x = dt == DType::b8 ? index_of(xs, 2, 1).to(dt) : values_of(xs, dt, 1);
    for (int64_t d = 0; d < 3; ++d) {
      INFO(dtype_name(dt) << " dim " << d);
      Shape is{3, 4, 5};
      is[size_t(d)] = 7;  // longer than x along dim: indices repeat
      const Tensor idx = index_of(is, xs[size_t(d)], 10 + uint64_t(d));
      const Tensor ref = empty(is, {.dtype = dt});
      kernels::gather(x, d, idx, ref);
      const Tensor out = empty(is, {.dtype = dt, .device = cuda_device()});
      kernels::gather(gpu(x), d, gpu(idx), out);
      require_close(out, ref, 0.0, 0.0);
    }
  }
  // Transposed x and index, negative dim.
  const Tensor x = values_of({6, 9}, DType::f32, 2);
  const Tensor idx = index_of({5, 4}, 6, 3);  // transposed: (4, 5), values index x.T's dim 1 (size 6)
  const Tensor ref = empty({4, 5});
  kernels::gather(x.transpose(0, 1), -1, idx.transpose(0, 1), ref);
  const Tensor out = empty({4, 5}, {.device = cuda_device()});
  kernels::gather(gpu(x).transpose(0, 1), -1, gpu(idx).transpose(0, 1), out);
  require_close(out, ref, 0.0, 0.0);
}

TEST_CASE("cuda scatter_add matches the CPU, with collisions") {
  TS_REQUIRE_GPU();
  const Shape os{4, 5, 6};
  for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64}) {
    for (int64_t d = 0; d < 3; ++d) {
      INFO(dtype_name(dt) << " dim " << d);
      Shape is{3, 4, 5};
      is[size_t(d)] = 40;  // many more entries than slots along dim: every slot collides
      Shape ss = is;
      ss[0] += 1;  // src may be larger than index along any dim
      const Tensor src = values_of(ss, dt, 20 + uint64_t(d));
      const Tensor idx = index_of(is, os[size_t(d)], 30 + uint64_t(d));
      const Tensor out0 = values_of(os, dt, 40);
      const Tensor ref = out0.clone();
      kernels::scatter_add(src, d, idx, ref);
      const Tensor out = gpu(out0);
      kernels::scatter_add(gpu(src), d, gpu(idx), out);
      // Small integers: every partial sum is exact in each dtype, so the results are equal.
      require_close(out, ref, 0.0, 0.0);
    }
  }
}

TEST_CASE("cuda scatter_add rounds 16-bit sums once") {
  TS_REQUIRE_GPU();
  // 1000 additions of 0.01 into one slot: rounding each add to bf16 stalls far below 10, the f32
  // accumulation the GPU uses does not.
  const int64_t n = 1000;
  for (DType dt : {DType::f16, DType::bf16}) {
    INFO(dtype_name(dt));
    const Tensor src = full({n}, 0.01, {.dtype = dt});
    const Tensor idx = zeros({n}, {.dtype = DType::i64});
    const Tensor out = zeros({2}, {.dtype = dt, .device = cuda_device()});
    kernels::scatter_add(gpu(src), 0, gpu(idx), out);
    const double each = testing::to_doubles(src)[0];
    const Tensor expect = from_vector<double>({each * double(n), 0.0}, {2}, {.dtype = dt});
    require_close(out, expect, dt == DType::f16 ? 1e-3 : 8e-3, 0.0);
  }
  // f32 into a transposed output view.
  const Tensor src = values_of({7, 3}, DType::f32, 5);
  const Tensor idx = index_of({7, 3}, 4, 6);
  const Tensor ref = zeros({3, 4});
  kernels::scatter_add(src, 0, idx, ref.transpose(0, 1));
  const Tensor buf = zeros({3, 4}, {.device = cuda_device()});
  kernels::scatter_add(gpu(src), 0, gpu(idx), buf.transpose(0, 1));
  require_close(buf, ref, 0.0, 0.0);
}

TEST_CASE("cuda gather and scatter_add reject bad index values without writing") {
  TS_REQUIRE_GPU();
  for (int64_t bad : {int64_t(6), int64_t(-1)}) {
    INFO("bad value " << bad);
    std::vector<int64_t> iv(12, 1);
    iv[7] = bad;
    const Tensor idx = gpu(from_vector<int64_t>(iv, {2, 6}));
    const Tensor x = gpu(values_of({2, 6}, DType::f32, 1));
    const Tensor out = zeros({2, 6}, {.device = cuda_device()});
    CHECK_THROWS_AS(kernels::gather(x, 1, idx, out), ValueError);
    CHECK_THROWS_AS(kernels::scatter_add(x, 1, idx, out), ValueError);
    require_close(out, zeros({2, 6}), 0.0, 0.0);
    const Tensor out16 = zeros({2, 6}, {.dtype = DType::bf16, .device = cuda_device()});
    CHECK_THROWS_AS(kernels::scatter_add(x.to(DType::bf16), 1, idx, out16), ValueError);
    require_close(out16, zeros({2, 6}, {.dtype = DType::bf16}), 0.0, 0.0);
  }
  // Shape and dtype mismatches throw before any launch.
  const Tensor x = gpu(values_of({2, 6}, DType::f32, 1));
  CHECK_THROWS_AS(kernels::gather(x, 1, gpu(index_of({2, 6}, 6, 1)).to(DType::i32), empty({2, 6}, {.device = cuda_device()})),
                  ValueError);
  CHECK_THROWS_AS(kernels::gather(x, 1, gpu(index_of({3, 6}, 6, 1)), empty({3, 6}, {.device = cuda_device()})),
                  ValueError);
}

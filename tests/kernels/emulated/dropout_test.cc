// The CUDA dropout body (kernels/cuda/dropout_body.cuh) under the SIMT emulator against the CPU
// kernel: the same (seed, offset) gives the same output bit for bit (so the same mask and the same
// 1 / (1 - p) scaling) in every floating dtype, for odd sizes, offsets past 2^32, p = 0 and p = 1,
// in place, and with a grid smaller than the work.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "core/factory.h"
#include "kernels/cuda/dropout_body.cuh"
#include "kernels/kernels.h"
#include "tests/testing/compare.h"
#include "tests/testing/simt_emulator.h"

namespace {

using namespace tessera;
namespace db = tessera::kernels::cuda::dropout_body;

// The launcher on contiguous x and out (which may be the same tensor); `blocks` 0 means the
// launcher's grid.
void emulated_dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset, const Tensor& out,
                      unsigned blocks = 0) {
  const int64_t n = x.numel();
  if (blocks == 0) blocks = db::grid_for(n);
  const uint32_t threshold = kernels::dropout_threshold(p);
  const float scale = kernels::dropout_scale(p);
  dispatch_floating(x.dtype(), "test", [&]<typename T>() {
    simt::emulate(blocks, db::kThreads, 0, [&](int64_t block, int tid, unsigned char*) {
      db::dropout(static_cast<const T*>(x.data_ptr()), static_cast<T*>(out.data_ptr()), n, seed,
                  offset, threshold, scale, block, blocks, tid, db::kThreads);
    });
  });
}

void run_case(const Shape& shape, DType dt, double p, uint64_t seed, uint64_t offset,
              unsigned blocks = 0) {
  INFO("shape " << shape_str(shape) << " " << dtype_name(dt) << " p " << p << " seed " << seed
                << " offset " << offset << " blocks " << blocks);
  Generator gen(seed + 1);
  const Tensor x = randn(shape, {.dtype = dt}, &gen);
  const Tensor out = empty(shape, {.dtype = dt});
  kernels::dropout(x, p, seed, offset, out);
  const Tensor out_e = full(shape, 7.0, {.dtype = dt});
  emulated_dropout(x, p, seed, offset, out_e, blocks);
  testing::require_close(out_e, out, 0.0, 0.0);  // bit for bit

  // Independently of the CPU kernel: kept elements are x / (1 - p) rounded once, dropped ones 0,
  // and the dropped fraction is about p.
  const std::vector<double> v = testing::to_doubles(out_e), xv = testing::to_doubles(x);
  const float scale = kernels::dropout_scale(p);
  int64_t dropped = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const bool keep = kernels::dropout_keep(seed, offset + i, kernels::dropout_threshold(p));
    const Tensor want = full({1}, double(float(xv[i]) * scale), {.dtype = dt});
    if (keep) {
      REQUIRE(v[i] == testing::to_doubles(want)[0]);
    } else {
      REQUIRE(v[i] == 0.0);
      ++dropped;
    }
  }
  const double n = double(v.size());
  if (n >= 10000) CHECK(std::abs(double(dropped) / n - p) < 0.02);
}

}  // namespace

TEST_CASE("dropout (emulated) draws the CPU's mask bit for bit", "[simt][dropout]") {
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    run_case({1}, dt, 0.5, 3, 0);
    run_case({37}, dt, 0.1, 11, 5);
    run_case({3, 1001}, dt, 0.3, 42, 123456);
  }
  run_case({12345}, DType::f32, 0.25, 7, (uint64_t(1) << 32) - 100);  // counters cross 2^32
  run_case({511}, DType::bf16, 0.9, 1, uint64_t(5) << 40);
  run_case({257}, DType::f32, 0.0, 9, 17);       // nothing dropped, scale 1
  run_case({257}, DType::f16, 1.0, 9, 17);       // everything dropped
  run_case({10007}, DType::f32, 0.4, 5, 99, 3);  // 3 blocks loop over 40 blocks' worth
}

TEST_CASE("dropout (emulated) in place equals the CPU out of place", "[simt][dropout]") {
  Generator gen(4);
  const Tensor x = randn({2, 333}, {.dtype = DType::bf16}, &gen);
  const Tensor out = empty({2, 333}, {.dtype = DType::bf16});
  kernels::dropout(x, 0.2, 8, 1000, out);
  const Tensor inplace = x.clone();
  emulated_dropout(inplace, 0.2, 8, 1000, inplace);
  testing::require_close(inplace, out, 0.0, 0.0);
}

// CUDA embedding against the CPU kernel. The forward is a copy (exact); the backward sums each id's
// rows in position order like the CPU, so it must match bit for bit too, with hot ids repeated
// thousands of times, sizes past the sort's shared-memory tile, every dtype pairing and strided
// tensors, and give the same bits on every run.
#include <catch2/catch.hpp>

#include "core/factory.h"
#include "kernels/kernels.h"
#include "tests/kernels/embedding_cases.h"
#include "tests/testing/compare.h"
#include "tests/testing/cuda.h"

using namespace tessera;
using testing::require_close;

namespace {

Tensor gpu(const Tensor& t) { return t.to(cuda_device()); }

using namespace testing::embedding;

void run_backward(const Shape& id_shape, int64_t V, int64_t C, DType g_dt, DType w_dt,
                  DType id_dt) {
  INFO("ids " << shape_str(id_shape) << " V " << V << " C " << C << " grad " << dtype_name(g_dt)
              << " weight " << dtype_name(w_dt) << " ids " << dtype_name(id_dt));
  Generator gen(5);
  const Tensor ids = skewed_ids(id_shape, V, id_dt, 9);
  const Tensor g = randn(with_channels(id_shape, C), {.dtype = g_dt}, &gen);
  const Tensor start = randn({V, C}, {.dtype = w_dt}, &gen);  // accumulated into, not overwritten
  const Tensor gw = start.clone();
  kernels::embedding_backward(g, ids, gw);

  const Tensor gw_g = gpu(start);
  kernels::embedding_backward(gpu(g), gpu(ids), gw_g);
  require_close(gw_g, gw, 0.0, 0.0);
  const Tensor again = gpu(start);
  kernels::embedding_backward(gpu(g), gpu(ids), again);
  require_close(again, gw_g, 0.0, 0.0);  // deterministic
}

}  // namespace

TEST_CASE("cuda embedding forward copies the CPU's rows") {
  TS_REQUIRE_GPU();
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    for (DType id_dt : {DType::i64, DType::i32}) {
      Generator gen(1);
      const Tensor w = randn({50, 37}, {.dtype = dt}, &gen);
      const Tensor ids = skewed_ids({3, 41}, 50, id_dt, 2);
      const Tensor out = empty({3, 41, 37}, {.dtype = dt});
      kernels::embedding(w, ids, out);
      const Tensor out_g = empty({3, 41, 37}, {.dtype = dt, .device = cuda_device()});
      kernels::embedding(gpu(w), gpu(ids), out_g);
      require_close(out_g, out, 0.0, 0.0);
    }
  }
  // Strided weight (rows not unit-stride), strided ids, strided output.
  Generator gen(3);
  const Tensor wt = randn({37, 50}, {}, &gen);
  const Tensor idt = skewed_ids({41, 3}, 50, DType::i64, 4);
  const Tensor out = empty({3, 41, 37});
  kernels::embedding(wt.transpose(0, 1), idt.transpose(0, 1), out);
  const Tensor out_g = empty({41, 3, 37}, {.device = cuda_device()}).transpose(0, 1);
  kernels::embedding(gpu(wt).transpose(0, 1), gpu(idt).transpose(0, 1), out_g);
  require_close(out_g, out, 0.0, 0.0);
}

TEST_CASE("cuda embedding backward sums hot rows deterministically, like the CPU") {
  TS_REQUIRE_GPU();
  run_backward({1}, 5, 3, DType::f32, DType::f32, DType::i64);
  run_backward({3}, 7, 33, DType::f32, DType::f32, DType::i32);
  run_backward({4, 1000}, 1000, 70, DType::f32, DType::f32, DType::i64);  // past one sort tile
  run_backward({5000}, 3, 5, DType::f32, DType::f32, DType::i64);         // three very hot ids
  run_backward({2, 2049}, 300, 40, DType::bf16, DType::f32, DType::i32);
  run_backward({777}, 100, 65, DType::f16, DType::f16, DType::i64);
  run_backward({513}, 64, 31, DType::f32, DType::bf16, DType::i64);
}

TEST_CASE("cuda embedding backward accumulates into a strided grad_weight") {
  TS_REQUIRE_GPU();
  Generator gen(8);
  const Tensor ids = skewed_ids({300}, 20, DType::i64, 3);
  const Tensor g = randn({300, 9}, {}, &gen);
  const Tensor base = randn({9, 20}, {}, &gen);
  const Tensor gw = base.transpose(0, 1).contiguous();
  kernels::embedding_backward(g, ids, gw);
  const Tensor base_g = gpu(base);
  kernels::embedding_backward(gpu(g), gpu(ids), base_g.transpose(0, 1));
  require_close(base_g.transpose(0, 1), gw, 0.0, 0.0);

  // No ids: nothing changes.
  const Tensor none = empty({0}, {.dtype = DType::i64, .device = cuda_device()});
  const Tensor untouched = gpu(gw);
  kernels::embedding_backward(empty({0, 9}, {.device = cuda_device()}), none, untouched);
  require_close(untouched, gw, 0.0, 0.0);
}

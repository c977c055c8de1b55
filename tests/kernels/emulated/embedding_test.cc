// The CUDA embedding bodies (kernels/cuda/embedding_body.cuh) under the SIMT emulator against the
// CPU kernel: the forward copy in every dtype with i32/i64 ids, strided rows and a capped grid, and
// the whole backward pipeline (key fill, bitonic sort tiles and global steps, run accumulation)
// bit for bit, with hot ids, sorts past one shared-memory tile and all dtype pairings.
#include <algorithm>
#include <catch2/catch.hpp>
#include <vector>

#include "core/factory.h"
#include "kernels/cuda/embedding_body.cuh"
#include "kernels/kernels.h"
#include "tests/kernels/embedding_cases.h"
#include "tests/testing/compare.h"
#include "tests/testing/simt_emulator.h"

namespace {

using namespace tessera;
namespace eb = tessera::kernels::cuda::embedding_body;
using eb::u64;

using namespace testing::embedding;

template <typename Fn>
void dispatch_ids(DType dt, Fn&& fn) {
  if (dt == DType::i32) {
    fn.template operator()<int32_t>();
  } else {
    fn.template operator()<int64_t>();
  }
}

// The launcher's forward on a contiguous out; `blocks` 0 means the launcher's grid.
void emulated_forward(const Tensor& w, const Tensor& ids, const Tensor& out, unsigned blocks = 0) {
  const int64_t V = w.size(0), C = w.size(1), n = ids.numel();
  if (blocks == 0) blocks = eb::grid_for(n * C, eb::kThreads);
  dispatch_ids(ids.dtype(), [&]<typename IdT>() {
    const IdT* id_p = static_cast<const IdT*>(ids.data_ptr());
    auto run = [&]<typename E>() {
      simt::emulate(blocks, eb::kThreads, 0, [&](int64_t block, int tid, unsigned char*) {
        eb::embedding_forward(static_cast<const E*>(w.data_ptr()), w.stride(0), V, id_p,
                              static_cast<E*>(out.data_ptr()), n, C, block, blocks, tid,
                              eb::kThreads);
      });
    };
    if (w.itemsize() == 4) {
      run.template operator()<uint32_t>();
    } else {
      run.template operator()<uint16_t>();
    }
  });
}

// The launcher's sorted keys for ids (contiguous): key fill, then the bitonic schedule.
std::vector<u64> emulated_sorted_keys(const Tensor& ids, int64_t V) {
  const int64_t n = ids.numel();
  const u64 padded = eb::padded_keys(n);
  std::vector<u64> keys(padded, 0x5555555555555555ull);
  dispatch_ids(ids.dtype(), [&]<typename IdT>() {
    const unsigned blocks = eb::grid_for(int64_t(padded), eb::kThreads);
    simt::emulate(blocks, eb::kThreads, 0, [&](int64_t block, int tid, unsigned char*) {
      eb::fill_keys(static_cast<const IdT*>(ids.data_ptr()), n, V, padded, keys.data(), block,
                    blocks, tid, eb::kThreads);
    });
  });
  const u64 tile = eb::sort_tile(padded);
  const int tile_threads = eb::sort_tile_threads(tile);
  eb::bitonic_schedule(
      padded,
      [&](u64 k) {
        simt::emulate(int64_t(padded / tile), tile_threads, eb::kSortSharedBytes,
                      [&](int64_t block, int tid, unsigned char* shared) {
                        eb::bitonic_tile(keys.data(), tile, k, block, tid, tile_threads, shared);
                      });
      },
      [&](u64 k, u64 j) {
        const unsigned blocks = eb::grid_for(int64_t(padded / 2), eb::kThreads);
        simt::emulate(blocks, eb::kThreads, 0, [&](int64_t block, int tid, unsigned char*) {
          eb::bitonic_global(keys.data(), padded, k, j, block, blocks, tid, eb::kThreads);
        });
      });
  return keys;
}

// The launcher's backward into gw (unit-stride rows); `grid_y` 0 means the launcher's grid.
void emulated_backward(const Tensor& g, const Tensor& ids, const Tensor& gw, unsigned grid_y = 0) {
  const int64_t V = gw.size(0), C = gw.size(1), n = ids.numel();
  const std::vector<u64> keys = emulated_sorted_keys(ids, V);
  // The sort's result is known independently: the keys in ascending order.
  std::vector<u64> expected(keys.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    if (int64_t(i) >= n) {
      expected[i] = ~0ull;
      continue;
    }
    const int64_t id = ids.dtype() == DType::i32 ? ids.data<int32_t>()[i] : ids.data<int64_t>()[i];
    expected[i] = ((id >= 0 && id < V ? u64(id) : eb::kNoId) << 32) | u64(i);
  }
  std::sort(expected.begin(), expected.end());
  REQUIRE(keys == expected);

  eb::AccumulateGrid grid = eb::accumulate_grid(n, C);
  if (grid_y != 0) grid.y = grid_y;
  dispatch_floating(g.dtype(), "test", [&]<typename G>() {
    dispatch_floating(gw.dtype(), "test", [&]<typename W>() {
      simt::emulate(int64_t(grid.x) * grid.y, 32 * eb::kAccumulateWarps, 0,
                    [&](int64_t block, int tid, unsigned char*) {
                      eb::accumulate_runs(keys.data(), n, static_cast<const G*>(g.data_ptr()), C,
                                          static_cast<W*>(gw.data_ptr()), gw.stride(0),
                                          block % grid.x, block / grid.x, grid.y, tid);
                    });
    });
  });
}

void run_backward(const Shape& id_shape, int64_t V, int64_t C, DType g_dt, DType w_dt, DType id_dt,
                  unsigned grid_y = 0) {
  INFO("ids " << shape_str(id_shape) << " V " << V << " C " << C << " grad " << dtype_name(g_dt)
              << " weight " << dtype_name(w_dt) << " ids " << dtype_name(id_dt) << " grid_y "
              << grid_y);
  Generator gen(5);
  const Tensor ids = skewed_ids(id_shape, V, id_dt, 9);
  const Tensor g = randn(with_channels(id_shape, C), {.dtype = g_dt}, &gen);
  const Tensor start = randn({V, C}, {.dtype = w_dt}, &gen);  // accumulated into, not overwritten
  const Tensor gw = start.clone();
  kernels::embedding_backward(g, ids, gw);
  const Tensor gw_e = start.clone();
  emulated_backward(g, ids, gw_e, grid_y);
  testing::require_close(gw_e, gw, 0.0, 0.0);
}

}  // namespace

TEST_CASE("embedding forward (emulated) copies the CPU's rows", "[simt][embedding]") {
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    for (DType id_dt : {DType::i64, DType::i32}) {
      INFO(dtype_name(dt) << " ids " << dtype_name(id_dt));
      Generator gen(1);
      const Tensor w = randn({50, 37}, {.dtype = dt}, &gen);
      const Tensor ids = skewed_ids({3, 41}, 50, id_dt, 2);
      const Tensor out = empty({3, 41, 37}, {.dtype = dt});
      kernels::embedding(w, ids, out);
      const Tensor out_e = full({3, 41, 37}, 7.0, {.dtype = dt});
      emulated_forward(w, ids, out_e);
      testing::require_close(out_e, out, 0.0, 0.0);
      // A grid smaller than the work: the grid-stride loop covers the rest.
      const Tensor out_s = full({3, 41, 37}, 7.0, {.dtype = dt});
      emulated_forward(w, ids, out_s, 3);
      testing::require_close(out_s, out, 0.0, 0.0);
    }
  }
  // Rows of the weight further apart than C (a column slice of a wider table).
  Generator gen(3);
  const Tensor wide = randn({20, 45}, {}, &gen);
  const Tensor w = wide.narrow(1, 3, 33);
  REQUIRE(w.stride(0) == 45);
  const Tensor ids = skewed_ids({129}, 20, DType::i64, 4);
  const Tensor out = empty({129, 33});
  kernels::embedding(w, ids, out);
  const Tensor out_e = full({129, 33}, 7.0);
  emulated_forward(w, ids, out_e);
  testing::require_close(out_e, out, 0.0, 0.0);
}

TEST_CASE("embedding forward (emulated) reads zeros for out-of-range ids", "[simt][embedding]") {
  // The CPU kernel rejects these ids; the GPU body must still never read outside the table.
  Generator gen(2);
  const Tensor w = randn({6, 5}, {}, &gen);
  const Tensor ids = from_vector(std::vector<int64_t>{-1, 2, 6, 1000, 5}, {5});
  const Tensor out_e = full({5, 5}, 7.0);
  emulated_forward(w, ids, out_e);
  const std::vector<double> o = testing::to_doubles(out_e), wv = testing::to_doubles(w);
  for (int64_t i = 0; i < 5; ++i) {
    const int64_t id = ids.data<int64_t>()[i];
    for (int64_t c = 0; c < 5; ++c) {
      const double want = id >= 0 && id < 6 ? wv[size_t(id * 5 + c)] : 0.0;
      REQUIRE(o[size_t(i * 5 + c)] == want);
    }
  }
}

TEST_CASE("embedding backward (emulated) sums hot rows like the CPU, bit for bit",
          "[simt][embedding]") {
  run_backward({1}, 5, 3, DType::f32, DType::f32, DType::i64);
  run_backward({3}, 7, 33, DType::f32, DType::f32, DType::i32);
  run_backward({4, 1000}, 1000, 70, DType::f32, DType::f32, DType::i64);  // past one sort tile
  run_backward({5000}, 3, 5, DType::f32, DType::f32, DType::i64);         // three very hot ids
  run_backward({2, 2049}, 300, 40, DType::bf16, DType::f32, DType::i32);  // 4 tiles, 2 stages
  run_backward({777}, 100, 65, DType::f16, DType::f16, DType::i64);
  run_backward({513}, 64, 31, DType::f32, DType::bf16, DType::i64);
  run_backward({37}, 9, 100, DType::bf16, DType::bf16, DType::i32, 1);  // channel-stride loop
}

TEST_CASE("embedding backward (emulated) accumulates into rows further apart than C",
          "[simt][embedding]") {
  Generator gen(8);
  const Tensor ids = skewed_ids({300}, 20, DType::i64, 3);
  const Tensor g = randn({300, 9}, {}, &gen);
  const Tensor base = randn({20, 14}, {}, &gen);
  const Tensor gw = base.narrow(1, 2, 9).contiguous();
  kernels::embedding_backward(g, ids, gw);
  const Tensor wide = base.clone();
  const Tensor gw_e = wide.narrow(1, 2, 9);
  emulated_backward(g, ids, gw_e);
  testing::require_close(gw_e, gw, 0.0, 0.0);
  // Columns outside the view are untouched.
  testing::require_close(wide.narrow(1, 0, 2), base.narrow(1, 0, 2), 0.0, 0.0);
  testing::require_close(wide.narrow(1, 11, 3), base.narrow(1, 11, 3), 0.0, 0.0);
}

TEST_CASE("embedding backward (emulated) skips out-of-range ids", "[simt][embedding]") {
  // The CPU rejects them; the GPU sorts them past every valid id and never writes them.
  const std::vector<int64_t> all{3, -1, 0, 3, 7, 2, 3, -5, 0, 100};
  std::vector<int64_t> valid;
  std::vector<int64_t> rows;
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i] >= 0 && all[i] < 7) {
      valid.push_back(all[i]);
      rows.push_back(int64_t(i));
    }
  }
  Generator gen(4);
  const Tensor g = randn({int64_t(all.size()), 6}, {}, &gen);
  const Tensor g_valid = empty({int64_t(rows.size()), 6});
  for (size_t r = 0; r < rows.size(); ++r)
    g_valid.select(0, int64_t(r)).copy_(g.select(0, rows[r]));
  const Tensor start = randn({7, 6}, {}, &gen);
  const Tensor gw = start.clone();
  kernels::embedding_backward(g_valid, from_vector(valid, {int64_t(valid.size())}), gw);
  const Tensor gw_e = start.clone();
  emulated_backward(g, from_vector(all, {int64_t(all.size())}), gw_e);
  testing::require_close(gw_e, gw, 0.0, 0.0);
}

// The layer norm kernel bodies (kernels/cuda/layer_norm_body.cuh) under the SIMT emulator against
// the CPU kernels: output, mean/rstd, grad_x, grad_weight and grad_bias for f32/f16/bf16, both row
// launch shapes (a warp per row, a block per row), grid-stride loops and many-chunk parameter sums.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "core/factory.h"
#include "kernels/cuda/layer_norm_body.cuh"
#include "kernels/kernels.h"
#include "tests/testing/compare.h"
#include "tests/testing/simt_emulator.h"

namespace {

using namespace tessera;
using testing::require_close;
namespace body = kernels::cuda::layer_norm_body;

// Calls fn.template operator()<T>() for the floating dtype.
template <typename Fn>
void dispatch(DType dt, Fn&& fn) {
  if (dt == DType::f16) return fn.template operator()<Half>();
  if (dt == DType::bf16) return fn.template operator()<BFloat16>();
  return fn.template operator()<float>();
}

const float* f32_or_null(const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }
float* f32_or_null_mut(const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }

// Tolerance of a T-rounded output whose f32 value the two kernels compute in different orders.
double out_tol(DType t) { return t == DType::bf16 ? 1.6e-2 : t == DType::f16 ? 2e-3 : 2e-5; }

// The launcher's row launch, with the block count optionally capped below it so the bodies' grid-
// stride loops run more than once (the GPU caps at 65536 blocks, too many rows to emulate).
body::RowLaunch launch_for(int64_t rows, int64_t C, int64_t max_blocks) {
  body::RowLaunch L = body::row_launch(rows, C);
  if (max_blocks > 0 && L.blocks > max_blocks) L.blocks = max_blocks;
  return L;
}

struct Forward {
  Tensor y, mean, rstd;
};

// layer_norm.cu's forward on contiguous CPU tensors: x (rows, C) of any floating dtype, w / b f32.
Forward emulated_forward(const Tensor& x, const Tensor& w, const Tensor& b, float eps,
                         int64_t max_blocks = 0) {
  const int64_t C = x.shape().back(), rows = x.numel() / C;
  Forward f{empty(x.shape(), {.dtype = x.dtype()}), empty({rows}), empty({rows})};
  const body::RowLaunch L = launch_for(rows, C, max_blocks);
  dispatch(x.dtype(), [&]<typename T>() {
    const T* xp = static_cast<const T*>(x.data_ptr());
    T* yp = static_cast<T*>(f.y.data_ptr());
    simt::emulate(L.blocks, L.threads, body::kForwardSharedBytes,
                  [&](int64_t block, int tid, unsigned char* shared) {
                    body::Forward<T>::run(xp, f32_or_null(w), f32_or_null(b), eps, yp,
                                          f.mean.data<float>(), f.rstd.data<float>(), rows, C,
                                          L.group, L.threads, L.blocks, block, tid, shared);
                  });
  });
  return f;
}

Tensor emulated_grad_x(const Tensor& gy, const Tensor& x, const Tensor& w, const Tensor& mean,
                       const Tensor& rstd, int64_t max_blocks = 0) {
  const int64_t C = x.shape().back(), rows = x.numel() / C;
  const Tensor gx = empty(x.shape(), {.dtype = x.dtype()});
  const body::RowLaunch L = launch_for(rows, C, max_blocks);
  dispatch(x.dtype(), [&]<typename T>() {
    simt::emulate(L.blocks, L.threads, body::kGradXSharedBytes,
                  [&](int64_t block, int tid, unsigned char* shared) {
                    body::GradX<T>::run(static_cast<const T*>(gy.data_ptr()),
                                        static_cast<const T*>(x.data_ptr()), f32_or_null(w),
                                        mean.data<float>(), rstd.data<float>(),
                                        static_cast<T*>(gx.data_ptr()), rows, C, L.group, L.threads,
                                        L.blocks, block, tid, shared);
                  });
  });
  return gx;
}

struct ParamGrads {
  Tensor grad_weight, grad_bias;
};

// The partials and the chunk-ordered sum, as the launcher runs them; sum_blocks > 0 caps the sum's
// grid to run its grid-stride loop.
ParamGrads emulated_param_grads(const Tensor& gy, const Tensor& x, const Tensor& mean,
                                const Tensor& rstd, bool want_dw, bool want_db,
                                int64_t sum_blocks = 0) {
  const int64_t C = x.shape().back(), rows = x.numel() / C;
  const body::ParamLaunch P = body::param_launch(rows, C);
  // Partials start as NaN: a (chunk, channel) the kernel failed to write poisons the sum.
  const Tensor dw_part = want_dw ? full({P.chunks, C}, NAN) : Tensor();
  const Tensor db_part = want_db ? full({P.chunks, C}, NAN) : Tensor();
  dispatch(x.dtype(), [&]<typename T>() {
    simt::emulate(P.col_blocks * P.chunks, body::kPartialThreads, body::kPartialSharedBytes,
                  [&](int64_t block, int tid, unsigned char* shared) {
                    body::ParamPartials<T>::run(
                        static_cast<const T*>(gy.data_ptr()), static_cast<const T*>(x.data_ptr()),
                        mean.data<float>(), rstd.data<float>(), rows, C, P.rows_per_chunk,
                        f32_or_null_mut(dw_part), f32_or_null_mut(db_part), block % P.col_blocks,
                        block / P.col_blocks, tid, shared);
                  });
  });
  int64_t blocks = body::grid_for(C, body::kSumThreads);
  if (sum_blocks > 0 && blocks > sum_blocks) blocks = sum_blocks;
  auto sum = [&](const Tensor& part) {
    if (!part.defined()) return Tensor();
    const Tensor out = full({C}, NAN);
    simt::emulate(blocks, body::kSumThreads, 0, [&](int64_t block, int tid, unsigned char*) {
      body::SumPartials::run(part.data<float>(), P.chunks, C, out.data<float>(), body::kSumThreads,
                             blocks, block, tid);
    });
    return out;
  };
  return {sum(dw_part), sum(db_part)};
}

// Forward statistics and output against a double-precision computation from the same inputs.
void check_against_double(const Tensor& x, const Tensor& w, const Tensor& b, float eps,
                          const Forward& f) {
  const int64_t C = x.shape().back(), rows = x.numel() / C;
  const std::vector<double> xv = testing::to_doubles(x);
  const std::vector<double> wv = w.defined() ? testing::to_doubles(w) : std::vector<double>();
  const std::vector<double> bv = b.defined() ? testing::to_doubles(b) : std::vector<double>();
  std::vector<double> mu(static_cast<size_t>(rows)), rs(mu.size()), yv(xv.size());
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0.0, ss = 0.0;
    for (int64_t i = 0; i < C; ++i) sum += xv[size_t(r * C + i)];
    const double m = sum / double(C);
    for (int64_t i = 0; i < C; ++i) ss += (xv[size_t(r * C + i)] - m) * (xv[size_t(r * C + i)] - m);
    mu[size_t(r)] = m;
    rs[size_t(r)] = 1.0 / std::sqrt(ss / double(C) + double(eps));
    for (int64_t i = 0; i < C; ++i) {
      double v = (xv[size_t(r * C + i)] - m) * rs[size_t(r)];
      if (w.defined()) v *= wv[size_t(i)];
      if (b.defined()) v += bv[size_t(i)];
      yv[size_t(r * C + i)] = v;
    }
  }
  auto as_f32 = [](const std::vector<double>& v, const Shape& shape) {
    return from_vector(std::vector<float>(v.begin(), v.end()), shape);
  };
  // Inputs near 1000 carry 6e-5 absolute rounding each: mean to 1e-7 relative, xhat to ~1e-4.
  require_close(f.mean, as_f32(mu, {rows}), 1e-7, 0.0);
  require_close(f.rstd, as_f32(rs, {rows}), 1e-4, 0.0);
  require_close(f.y, as_f32(yv, {rows, C}), 1e-3, 1e-3);
}

struct Case {
  int64_t rows, C;
  DType dtype;
  bool weight = true, bias = true;
  int64_t max_blocks = 0;  // cap on the row kernels' grid (0: the launcher's grid)
  float offset = 0.0f;     // added to x: rows with a large mean relative to their spread
};

std::string name_of(const Case& c) {
  return "rows " + std::to_string(c.rows) + " C " + std::to_string(c.C) + " " +
         dtype_name(c.dtype) + (c.weight ? " weight" : "") + (c.bias ? " bias" : "") +
         (c.max_blocks ? " blocks<=" + std::to_string(c.max_blocks) : "") +
         (c.offset != 0.0f ? " offset " + std::to_string(c.offset) : "");
}

Tensor input(int64_t rows, int64_t C, DType dt, float offset, uint64_t seed) {
  Generator gen(seed);
  const Tensor r = randn({rows, C}, {}, &gen);
  if (offset == 0.0f) return r.to(dt);
  std::vector<double> v = testing::to_doubles(r);
  std::vector<float> shifted(v.size());
  for (size_t i = 0; i < v.size(); ++i) shifted[i] = float(v[i]) + offset;
  return from_vector(shifted, {rows, C}, {.dtype = dt});
}

void run_case(const Case& c) {
  INFO(name_of(c));
  Generator gen(7);
  const Tensor w = c.weight ? randn({c.C}, {}, &gen) : Tensor();
  const Tensor b = c.bias ? randn({c.C}, {}, &gen) : Tensor();
  const Tensor x = input(c.rows, c.C, c.dtype, c.offset, 11);
  const Tensor gy = input(c.rows, c.C, c.dtype, 0.0f, 12);
  const float eps = 1e-5f;

  const Tensor y = empty({c.rows, c.C}, {.dtype = c.dtype}), mean = empty({c.rows}),
               rstd = empty({c.rows});
  kernels::layer_norm(x, w, b, eps, y, mean, rstd);
  const Tensor gx = empty({c.rows, c.C}, {.dtype = c.dtype});
  const Tensor gw = empty({c.C}), gb = empty({c.C});
  kernels::layer_norm_backward(gy, x, w, mean, rstd, gx, gw, gb);

  const Forward f = emulated_forward(x, w, b, eps, c.max_blocks);
  if (c.offset == 0.0f) {
    require_close(f.mean, mean, 1e-5, 1e-5);
    require_close(f.rstd, rstd, 1e-5, 1e-5);
    require_close(f.y, y, out_tol(c.dtype), out_tol(c.dtype));
  } else {
    // Rows far from zero: the CPU's f32 row sum loses bits of the mean (more so in unvectorised
    // builds), so the statistics are held to a double-precision reference instead.
    check_against_double(x, w, b, eps, f);
  }
  // The backward reads the CPU's statistics, so its error is only its own.
  const Tensor egx = emulated_grad_x(gy, x, w, mean, rstd, c.max_blocks);
  require_close(egx, gx, 4 * out_tol(c.dtype), 4 * out_tol(c.dtype));
  const ParamGrads p = emulated_param_grads(gy, x, mean, rstd, true, true);
  require_close(p.grad_weight, gw, 1e-4, 1e-5 * double(c.rows));
  require_close(p.grad_bias, gb, 1e-4, 1e-5 * double(c.rows));
}

}  // namespace

TEST_CASE("emulated layer_norm matches the CPU across sizes, dtypes and affine options") {
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    run_case({1, 1, dt});
    run_case({7, 33, dt});
    run_case({70, 33, dt, false, false});   // several chunks of 32 rows, last one partial
    run_case({9, 768, dt, true, false});    // weight only
    run_case({13, 1000, dt, false, true});  // bias only; 13 rows: a partly idle second block
    run_case({3, 1025, dt});                // the smallest row a whole block normalises
    run_case({5, 1537, dt, false, false});  // block per row, three strides of 512 and a tail
  }
}

TEST_CASE("emulated layer_norm grid-stride loops cover rows past the grid") {
  // Warp rows: 2 blocks of 8 rows for 37 rows. Block rows: 2 blocks for 5 rows, so a block reuses
  // its shared statistics across rows (the barrier before the next row's writes).
  run_case({37, 100, DType::f32, true, true, 2});
  run_case({5, 2000, DType::f32, true, true, 2});
  run_case({5, 2000, DType::bf16, false, true, 1});
}

TEST_CASE("emulated layer_norm statistics hold for rows far from zero") {
  run_case({20, 300, DType::f32, true, true, 0, 1000.0f});
  run_case({4, 1500, DType::f32, false, false, 0, -500.0f});
}

TEST_CASE("emulated layer_norm keeps constant rows finite") {
  // Zero variance: rstd = 1/sqrt(eps) and y = bias, in both launch shapes.
  for (int64_t C : {50, 1200}) {
    INFO("C " << C);
    const Tensor x = full({3, C}, 2.5), w = ones({C}), b = full({C}, 0.25);
    const Forward f = emulated_forward(x, w, b, 1e-5f);
    require_close(f.mean, full({3}, 2.5), 1e-6, 0.0);
    require_close(f.rstd, full({3}, 1.0 / std::sqrt(1e-5)), 1e-4, 0.0);
    require_close(f.y, full({3, C}, 0.25), 0.0, 1e-6);
  }
}

// CPU statistics and parameter gradients (no weight) for a (rows, C) case.
struct Reference {
  Tensor x, gy, mean, rstd, grad_weight, grad_bias;
};
Reference reference(int64_t rows, int64_t C, DType dt) {
  Reference r{input(rows, C, dt, 0.0f, 21),
              input(rows, C, dt, 0.0f, 22),
              empty({rows}),
              empty({rows}),
              empty({C}),
              empty({C})};
  kernels::layer_norm(r.x, Tensor(), Tensor(), 1e-5, empty({rows, C}, {.dtype = dt}), r.mean,
                      r.rstd);
  kernels::layer_norm_backward(r.gy, r.x, Tensor(), r.mean, r.rstd, Tensor(), r.grad_weight,
                               r.grad_bias);
  return r;
}

TEST_CASE("emulated layer_norm parameter gradients over many chunks, either one alone") {
  {
    // 32845 rows: 33 rows per chunk (the 1024-chunk cap), 996 chunks with a partial last one, and
    // two column tiles for 33 channels, the second with one live lane.
    const int64_t rows = 32845, C = 33;
    const body::ParamLaunch P = body::param_launch(rows, C);
    REQUIRE(P.rows_per_chunk == 33);
    REQUIRE(P.chunks == 996);
    REQUIRE(P.col_blocks == 2);
    const Reference r = reference(rows, C, DType::bf16);
    const ParamGrads p = emulated_param_grads(r.gy, r.x, r.mean, r.rstd, true, true);
    require_close(p.grad_weight, r.grad_weight, 1e-4, 1e-5 * double(rows));
    require_close(p.grad_bias, r.grad_bias, 1e-4, 1e-5 * double(rows));
  }
  {
    // Only one of the two outputs (the other partial pointer null), and the chunk-ordered sum's
    // grid-stride loop: 1000 channels through one block of 256 threads.
    const Reference r = reference(70, 1000, DType::f32);
    const ParamGrads dw = emulated_param_grads(r.gy, r.x, r.mean, r.rstd, true, false, 1);
    CHECK(!dw.grad_bias.defined());
    require_close(dw.grad_weight, r.grad_weight, 1e-4, 1e-5 * 70);
    const ParamGrads db = emulated_param_grads(r.gy, r.x, r.mean, r.rstd, false, true, 1);
    CHECK(!db.grad_weight.defined());
    require_close(db.grad_bias, r.grad_bias, 1e-4, 1e-5 * 70);
  }
}

TEST_CASE("emulated layer_norm launch geometry matches the launcher's") {
  const body::RowLaunch warp = body::row_launch(1'000'000, 1024);
  CHECK(warp.threads == 256);
  CHECK(warp.group == 32);
  CHECK(warp.blocks == 65536);  // capped: the loop covers the rest
  const body::RowLaunch blk = body::row_launch(100, 1025);
  CHECK(blk.threads == 512);
  CHECK(blk.group == 512);
  CHECK(blk.blocks == 100);
  const body::ParamLaunch p = body::param_launch(1, 1);
  CHECK(p.rows_per_chunk == 32);
  CHECK(p.chunks == 1);
  CHECK(p.col_blocks == 1);
}

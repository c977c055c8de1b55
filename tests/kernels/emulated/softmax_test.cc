// The softmax-family bodies (kernels/cuda/softmax_body.cuh) under the SIMT emulator against the CPU
// kernels: softmax, log-softmax and both backwards on warp rows (up to 1024) and block rows
// (above), f32/f16/bf16, odd sizes, strided inputs and outputs, in place, -inf entries and masked
// rows.
#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/factory.h"
#include "kernels/cuda/softmax_body.cuh"
#include "kernels/kernels.h"
#include "tests/testing/compare.h"
#include "tests/testing/simt_emulator.h"

namespace {

using namespace tessera;
namespace sb = tessera::kernels::cuda::softmax_body;
using sb::Kind;
using testing::require_close;

// Row index -> offsets of the row's first element in three tensors of one leading shape: what the
// launcher's OffsetCalc computes, written out plainly.
struct LeadRows {
  struct Offsets {
    int64_t v[3];
  };
  std::vector<int64_t> sizes;                   // leading dims, outermost first
  std::vector<std::array<int64_t, 3>> strides;  // per leading dim, per tensor

  Offsets get(int64_t row) const {
    Offsets o{{0, 0, 0}};
    for (size_t d = sizes.size(); d-- > 0;) {
      const int64_t idx = row % sizes[d];
      row /= sizes[d];
      for (int k = 0; k < 3; ++k) o.v[k] += idx * strides[d][size_t(k)];
    }
    return o;
  }
};

// The launcher's geometry and parameters, run under the emulator; `blocks` overrides the grid
// (a small grid exercises the grid-stride loop).
void emulated(Kind kind, const Tensor& a, const Tensor& b, const Tensor& out, int64_t blocks = 0) {
  const Tensor& bb = b.defined() ? b : a;
  const int64_t nd = out.dim();
  const int64_t cols = nd == 0 ? 1 : out.size(nd - 1);
  const int64_t n_rows = cols == 0 ? 0 : out.numel() / cols;
  if (n_rows == 0) return;
  LeadRows rows;
  for (int64_t d = 0; d + 1 < nd; ++d) {
    rows.sizes.push_back(out.size(d));
    rows.strides.push_back({a.stride(d), bb.stride(d), out.stride(d)});
  }
  auto last_stride = [&](const Tensor& t) { return nd == 0 ? int64_t(0) : t.stride(nd - 1); };
  if (blocks == 0) blocks = sb::blocks_for(n_rows, cols);
  dispatch_floating(a.dtype(), "emulated softmax", [&]<typename T>() {
    sb::Params<T, LeadRows> p{static_cast<const T*>(a.data_ptr()),
                              static_cast<const T*>(bb.data_ptr()),
                              static_cast<T*>(out.data_ptr()),
                              rows,
                              last_stride(a),
                              last_stride(bb),
                              last_stride(out),
                              n_rows,
                              cols,
                              kind};
    auto run = [&]<bool kBlock>() {
      simt::emulate(blocks, sb::kThreads, sb::kSharedBytes,
                    [&](int64_t block, int tid, unsigned char* shared) {
                      sb::RowsBody<T, kBlock>::run(p, blocks, block, tid, shared);
                    });
    };
    if (sb::block_rows(cols)) {
      run.template operator()<true>();
    } else {
      run.template operator()<false>();
    }
  });
}

void cpu(Kind kind, const Tensor& a, const Tensor& b, const Tensor& out) {
  switch (kind) {
    case Kind::softmax:
      return kernels::softmax(a, out);
    case Kind::log_softmax:
      return kernels::log_softmax(a, out);
    case Kind::softmax_backward:
      return kernels::softmax_backward(a, b, out);
    case Kind::log_softmax_backward:
      return kernels::log_softmax_backward(a, b, out);
  }
}

Kind backward_of(Kind k) {
  return k == Kind::softmax ? Kind::softmax_backward : Kind::log_softmax_backward;
}

Tensor uniform(const Shape& shape, DType dt, double lo, double hi, uint64_t seed) {
  Generator gen(seed);
  Tensor t = empty(shape);
  uniform_(t, lo, hi, &gen);
  return t.to(dt);
}

struct Tol {
  double rtol, atol;
};

// Probabilities are at most 1 and log-probabilities O(log C); 16-bit outputs may round one ulp
// apart (the kernel's exp is math::exp, the CPU's exp_approx, and sums run in different orders).
Tol tol_for(DType dt) {
  switch (dt) {
    case DType::f16:
      return {2e-3, 2e-4};
    case DType::bf16:
      return {1.6e-2, 2e-3};
    default:
      return {3e-5, 1e-6};
  }
}

// Forward and backward of `kind` on x's view, CPU against the emulated body; outputs start as
// garbage so every element must be written. The backward takes the CPU forward's output.
template <typename View>
void compare(Kind kind, const Tensor& base, View view, int64_t blocks = 0) {
  const Tensor x = view(base);
  const DType dt = x.dtype();
  const Tol tol = tol_for(dt);
  const Tensor y = empty(x.shape(), {.dtype = dt});
  cpu(kind, x, Tensor(), y);
  const Tensor y_e = full(x.shape(), 7.0, {.dtype = dt});
  emulated(kind, x, Tensor(), y_e, blocks);
  {
    INFO("forward");
    require_close(y_e, y, tol.rtol, tol.atol);
  }
  const Tensor g = view(uniform(base.shape(), dt, -1.0, 1.0, 77));
  const Tensor gx = empty(x.shape(), {.dtype = dt});
  cpu(backward_of(kind), y, g, gx);
  const Tensor gx_e = full(x.shape(), 7.0, {.dtype = dt});
  emulated(backward_of(kind), y, g, gx_e, blocks);
  INFO("backward");
  // The backward's sum over the row amplifies each side's rounding by up to sqrt(C).
  require_close(gx_e, gx, tol.rtol * 4, tol.atol * 4);
}

std::string label(Kind k) { return k == Kind::softmax ? "softmax" : "log_softmax"; }

const Tensor& same(const Tensor& t) { return t; }

}  // namespace

TEST_CASE("softmax family (emulated) matches the CPU on warp and block rows", "[simt][softmax]") {
  const Shape shapes[] = {{1, 1},    {5, 31},   {9, 33},    {3, 1000}, {2, 1024},
                          {3, 1025}, {2, 5000}, {2, 3, 77}, {17},      {}};
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    for (const Shape& s : shapes) {
      for (Kind k : {Kind::softmax, Kind::log_softmax}) {
        INFO(dtype_name(dt) << " shape " << shape_str(s) << " " << label(k));
        compare(k, uniform(s, dt, -8.0, 8.0, 5), same);
      }
    }
  }
}

TEST_CASE("softmax family (emulated): grid-stride loops over more rows than blocks",
          "[simt][softmax]") {
  for (Kind k : {Kind::softmax, Kind::log_softmax}) {
    INFO(label(k));
    compare(k, uniform({45, 31}, DType::f32, -4.0, 4.0, 11), same, 2);    // 8 warps x 2 blocks
    compare(k, uniform({5, 1500}, DType::bf16, -4.0, 4.0, 12), same, 2);  // 2 blocks
  }
}

TEST_CASE("softmax family (emulated) on strided rows and outputs matches the CPU",
          "[simt][softmax]") {
  for (DType dt : {DType::f32, DType::bf16}) {
    for (Kind k : {Kind::softmax, Kind::log_softmax}) {
      INFO(dtype_name(dt) << " " << label(k));
      // (C, R) transposed: rows of stride R along the softmax dim; short and long rows.
      compare(k, uniform({45, 6}, dt, -4.0, 4.0, 6),
              [](const Tensor& t) { return t.transpose(0, 1); });
      compare(k, uniform({1500, 3}, dt, -4.0, 4.0, 7),
              [](const Tensor& t) { return t.transpose(0, 1); });
      // Every other row of a 3-d tensor: leading dims that do not merge.
      compare(k, uniform({4, 6, 50}, dt, -4.0, 4.0, 8),
              [](const Tensor& t) { return t.slice(1, 0, 6, 2); });
    }
  }
  // A strided output: the odd columns of a buffer; the even ones must stay untouched.
  const Tensor x = uniform({8, 40}, DType::f32, -3.0, 3.0, 9);
  const Tensor ref = empty({8, 40});
  kernels::softmax(x, ref);
  const Tensor buf = zeros({8, 80});
  emulated(Kind::softmax, x, Tensor(), buf.slice(1, 1, 80, 2));
  require_close(buf.slice(1, 1, 80, 2), ref, 3e-5, 1e-6);
  require_close(buf.slice(1, 0, 80, 2), zeros({8, 40}), 0.0, 0.0);
}

TEST_CASE("softmax family (emulated) in place matches the CPU", "[simt][softmax]") {
  for (int64_t cols : {77, 2000}) {
    for (Kind k : {Kind::softmax, Kind::log_softmax}) {
      INFO(cols << " " << label(k));
      const Tensor x = uniform({3, cols}, DType::f32, -5.0, 5.0, 13);
      const Tensor y = empty({3, cols});
      cpu(k, x, Tensor(), y);
      const Tensor io = x.clone();
      emulated(k, io, Tensor(), io);
      require_close(io, y, 3e-5, 1e-6);
      // Backward over grad_y itself.
      const Tensor g = uniform({3, cols}, DType::f32, -1.0, 1.0, 14);
      const Tensor gx = empty({3, cols});
      cpu(backward_of(k), y, g, gx);
      const Tensor g_io = g.clone();
      emulated(backward_of(k), y, g_io, g_io);
      require_close(g_io, gx, 1.2e-4, 4e-6);
    }
  }
}

TEST_CASE("softmax family (emulated): large logits, -inf entries and masked rows like the CPU",
          "[simt][softmax]") {
  const double inf = std::numeric_limits<double>::infinity();
  // Rows: large logits with a -inf, mixed, fully masked (NaN on the CPU: exp(-inf - -inf)), and a
  // NaN entry (NaN never wins the max; it surfaces through exp).
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor x4 = from_vector<double>({1000.0, 999.0, -inf, 998.0, -50.0, -inf, 0.0, 3.0, -inf,
                                         -inf, -inf, -inf, 1.0, nan, 2.0, 0.5},
                                        {4, 4});
  for (Kind k : {Kind::softmax, Kind::log_softmax}) {
    INFO(label(k));
    compare(k, x4, same);
    // The same rows past kBlockCols: -inf padding on the right of each.
    Tensor wide = full({4, 1100}, -inf);
    wide.slice(1, 0, 4, 1).copy_(x4);
    compare(k, wide, same);
    compare(k, wide.to(DType::bf16), same);
  }
}

// CPU matmul: maps strided (possibly transposed or broadcast) operands onto sgemm_batched without
// copies when it can; 16-bit floats go through f32.
#include "kernels/cpu/matmul.h"

#include <array>

#include "core/factory.h"
#include "core/strided_loop.h"
#include "kernels/cpu/gemm.h"

namespace tessera::kernels::cpu {
namespace {

// How sgemm reads a stored (rows, cols) matrix with element strides (rs, cs): row-major with row
// stride ld, or transposed with column stride ld. A dim of size 1 never steps, so its stride is free.
struct Layout {
  bool ok = false;
  bool trans = false;
  int64_t ld = 0;
};

Layout layout_of(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  if ((cols == 1 || cs == 1) && (rows == 1 || rs >= cols)) return {true, false, rows == 1 ? cols : rs};
  if ((rows == 1 || rs == 1) && (cols == 1 || cs >= rows)) return {true, true, cols == 1 ? rows : cs};
  return {};
}

Layout layout_of(const Tensor& t) {
  const int64_t n = t.dim();
  return layout_of(t.size(n - 2), t.size(n - 1), t.stride(n - 2), t.stride(n - 1));
}

// t as f32 that sgemm can read. Broadcast batch dims (stride 0) stay broadcast: only one copy of
// the broadcast data is converted.
Tensor gemm_operand(const Tensor& t) {
  if (t.dtype() == DType::f32 && layout_of(t).ok) return t;
  Tensor compact = t;
  for (int64_t d = 0; d + 2 < t.dim(); ++d) {
    if (t.stride(d) == 0 && t.size(d) > 1) compact = compact.narrow(d, 0, 1);
  }
  Tensor dense = compact.dtype() == DType::f32 ? compact.clone() : compact.to(DType::f32);
  return dense.expand(t.shape());
}

// out = a @ b (+ out) (+ bias) with every operand f32 and sgemm-readable; bias (N) is contiguous or
// null, and then out is not stored transposed.
void matmul_f32(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate, const float* bias) {
  const int64_t nd = out.dim();
  const int64_t m = out.size(nd - 2), n = out.size(nd - 1), k = a.size(nd - 1);
  const Layout la = layout_of(a), lb = layout_of(b), lc = layout_of(out);
  Shape batch_shape(out.shape().begin(), out.shape().end() - 2);
  std::array<Strides, 3> batch_strides;
  const Tensor* ops[3] = {&a, &b, &out};
  for (int i = 0; i < 3; ++i) {
    batch_strides[i] = Strides(ops[i]->strides().begin(), ops[i]->strides().end() - 2);
  }
  // Batch dims that step evenly in all three operands merge, so a contiguous batch is one call.
  StridedLoop<3> loop(batch_shape, batch_strides);
  const float* pa = static_cast<const float*>(a.data_ptr());
  const float* pb = static_cast<const float*>(b.data_ptr());
  float* pc = static_cast<float*>(out.data_ptr());
  const float beta = accumulate ? 1.0f : 0.0f;
  loop.for_rows(0, loop.num_rows(), [&](const std::array<int64_t, 3>& off) {
    const auto s = loop.row_strides();
    if (!lc.trans) {
      sgemm_batched(la.trans, lb.trans, loop.row_size(), m, n, k, 1.0f, pa + off[0], la.ld, s[0],
                    pb + off[1], lb.ld, s[1], beta, pc + off[2], lc.ld, s[2], bias);
    } else {
      TS_ASSERT(bias == nullptr);
      // out is stored transposed: out^T (N, M) = b^T a^T, with each operand's flag flipped.
      sgemm_batched(!lb.trans, !la.trans, loop.row_size(), n, m, k, 1.0f, pb + off[1], lb.ld,
                    s[1], pa + off[0], la.ld, s[0], beta, pc + off[2], lc.ld, s[2]);
    }
  });
}

}  // namespace

void matmul(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate, const Tensor& bias) {
  TS_CHECK(a.dim() >= 2 && b.dim() == a.dim() && out.dim() == a.dim(), "matmul",
           "expected a, b, out with the same number (>= 2) of dims, got ", a.describe(), ", ",
           b.describe(), ", ", out.describe());
  const int64_t nd = a.dim();
  const int64_t m = a.size(nd - 2), k = a.size(nd - 1), n = b.size(nd - 1);
  bool shapes_ok = b.size(nd - 2) == k && out.size(nd - 2) == m && out.size(nd - 1) == n;
  for (int64_t d = 0; d + 2 < nd; ++d) {
    shapes_ok &= a.size(d) == out.size(d) && b.size(d) == out.size(d);
  }
  TS_CHECK(shapes_ok, "matmul", "expected (batch..., M, K) @ (batch..., K, N) -> (batch..., M, N), got ",
           shape_str(a.shape()), " @ ", shape_str(b.shape()), " -> ", shape_str(out.shape()));
  TS_CHECK(a.dtype() == b.dtype() && a.dtype() == out.dtype() && is_floating(a.dtype()), "matmul",
           "expected one floating dtype for a, b and out, got ", dtype_name(a.dtype()), ", ",
           dtype_name(b.dtype()), ", ", dtype_name(out.dtype()));
  for (int64_t d = 0; d + 2 < nd; ++d) {
    TS_CHECK(out.stride(d) != 0 || out.size(d) == 1, "matmul",
             "expected an out without broadcast (stride 0) dims, got strides ",
             shape_str(out.strides()), " for ", out.describe());
  }
  TS_CHECK(!bias.defined() || (bias.shape() == Shape{n} && bias.dtype() == out.dtype()), "matmul",
           "expected a bias (", n, ") of ", dtype_name(out.dtype()), ", got ", bias.describe());
  if (out.numel() == 0) return;

  const Tensor ga = gemm_operand(a), gb = gemm_operand(b);
  Tensor gbias;
  if (bias.defined()) gbias = bias.dtype() == DType::f32 ? bias.contiguous() : bias.to(DType::f32);
  const float* pbias = gbias.defined() ? static_cast<const float*>(gbias.data_ptr()) : nullptr;
  const Layout lc = layout_of(out);
  // The GEMM adds the bias along the rows it stores, so a transposed out takes the dense path.
  if (out.dtype() == DType::f32 && lc.ok && (pbias == nullptr || !lc.trans)) {
    matmul_f32(ga, gb, out, accumulate, pbias);
    return;
  }
  // Compute into a dense f32 result, then round and scatter it into out.
  Tensor result = accumulate ? (out.dtype() == DType::f32 ? out.clone() : out.to(DType::f32))
                             : empty(out.shape(), {.dtype = DType::f32, .device = out.device()});
  matmul_f32(ga, gb, result, accumulate, pbias);
  out.copy_(result);
}

}  // namespace tessera::kernels::cpu

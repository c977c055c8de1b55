// CPU fused linear: the GEMM adds the bias as it stores the f32 product (no pass of its own), the
// activation runs on the f32 result, and out is rounded once (as the CUDA epilogue does).
#include "kernels/cpu/linear.h"

#include "core/factory.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/matmul.h"

namespace tessera::kernels::cpu {

void linear(const Tensor& x, const Tensor& w, const Tensor& bias, Activation act, const Tensor& out) {
  constexpr const char* kOp = "linear";
  TS_CHECK(x.defined() && w.defined() && out.defined() && x.dim() == 2 && w.dim() == 2 && out.dim() == 2,
           kOp, "expected x (M, K), w (N, K) and out (M, N), got ", x.describe(), ", ", w.describe(),
           ", ", out.describe());
  const int64_t m = x.size(0), k = x.size(1), n = w.size(0);
  TS_CHECK(w.size(1) == k && out.size(0) == m && out.size(1) == n, kOp,
           "expected x (M, K), w (N, K) and out (M, N), got ", shape_str(x.shape()), ", ",
           shape_str(w.shape()), ", ", shape_str(out.shape()));
  TS_CHECK(!bias.defined() || bias.shape() == Shape{n}, kOp, "expected bias (", n, "), got ",
           bias.describe());
  TS_CHECK(is_floating(x.dtype()) && w.dtype() == x.dtype() && out.dtype() == x.dtype() &&
               (!bias.defined() || bias.dtype() == x.dtype()),
           kOp, "expected one floating dtype for x, w, bias and out, got ", x.describe(), ", ",
           w.describe(), ", ", out.describe());
  if (out.numel() == 0) return;

  const Tensor w_t = w.transpose(0, 1);  // (K, N)
  if (act == Activation::none) {
    cpu::matmul(x, w_t, out, /*accumulate=*/false, bias);
    return;
  }
  // GELU runs on the f32 product, so 16-bit operands are widened first (as matmul would).
  const TensorOptions f32{.dtype = DType::f32, .device = out.device()};
  Tensor acc = empty({m, n}, f32);
  cpu::matmul(x.to(DType::f32), w.to(DType::f32).transpose(0, 1), acc, /*accumulate=*/false,
              bias.defined() ? bias.to(DType::f32) : bias);
  if (out.dtype() == DType::f32) {
    cpu::unary(UnaryOp::gelu_tanh, acc, out);
    return;
  }
  Tensor y = empty({m, n}, f32);
  cpu::unary(UnaryOp::gelu_tanh, acc, y);
  out.copy_(y);
}

}  // namespace tessera::kernels::cpu

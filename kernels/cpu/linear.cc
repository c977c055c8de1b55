// CPU fused linear: the product accumulates in f32 onto the broadcast bias, the activation runs on
// the f32 result, and out is rounded once (as the CUDA epilogue does).
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

  const TensorOptions f32{.dtype = DType::f32, .device = out.device()};
  Tensor acc = empty({m, n}, f32);  // (M, N)
  if (bias.defined()) {
    acc.copy_(bias.expand({m, n}));
  } else {
    acc.zero_();
  }
  if (k > 0) {
    const Tensor x32 = x.dtype() == DType::f32 ? x : x.to(DType::f32);
    const Tensor w32 = w.dtype() == DType::f32 ? w : w.to(DType::f32);
    cpu::matmul(x32, w32.transpose(0, 1), acc, /*accumulate=*/true);
  }
  if (act == Activation::gelu_tanh) {
    Tensor y = empty({m, n}, f32);
    cpu::unary(UnaryOp::gelu_tanh, acc, y);
    acc = y;
  }
  out.copy_(acc);
}

}  // namespace tessera::kernels::cpu

// Differentiable binary arithmetic (add, sub, mul, div, pow, maximum, minimum), their scalar forms
// and the arithmetic operators. Operands are promoted to one dtype and broadcast to one shape.
#include <cmath>

#include "autograd/ops_internal.h"
#include "kernels/kernels.h"

namespace tessera {
namespace {

using autograd::make_node;
using autograd::Node;
using autograd::SavedTensor;
using kernels::BinaryOp;
using namespace ops_detail;

const char* op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::add: return "add";
    case BinaryOp::sub: return "sub";
    case BinaryOp::mul: return "mul";
    case BinaryOp::div: return "div";
    case BinaryOp::pow: return "pow";
    case BinaryOp::maximum: return "maximum";
    case BinaryOp::minimum: return "minimum";
    default: return "binary";
  }
}

// Shapes and dtypes of both inputs, for turning a gradient of the output into theirs.
struct BinaryBackward : Node {
  Shape a_shape, b_shape;
  DType a_dtype = DType::f32, b_dtype = DType::f32;
  SavedTensor a, b, out;  // only what the formula needs
  BinaryOp op = BinaryOp::add;

  std::string name() const override { return std::string(op_name(op)) + "Backward"; }
  void release_saved() override {
    a.reset();
    b.reset();
    out.reset();
  }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    const char* nm = op_name(op);
    Tensor ga, gb;
    switch (op) {
      case BinaryOp::add:
        ga = g;
        gb = g;
        break;
      case BinaryOp::sub:
        ga = g;
        if (needs_input_grad(1)) gb = neg(g);
        break;
      case BinaryOp::mul:
        if (needs_input_grad(0)) ga = mul(g, b.unpack(nm));
        if (needs_input_grad(1)) gb = mul(g, a.unpack(nm));
        break;
      case BinaryOp::div: {
        Tensor bv = b.unpack(nm);
        if (needs_input_grad(0)) ga = div(g, bv);
        if (needs_input_grad(1)) gb = neg(div(mul(g, a.unpack(nm)), mul(bv, bv)));
        break;
      }
      case BinaryOp::pow: {
        Tensor av = a.unpack(nm), bv = b.unpack(nm);
        if (needs_input_grad(0)) ga = mul(g, mul(bv, pow(av, sub(bv, 1.0))));
        if (needs_input_grad(1)) {
          // d(a^b)/db = a^b log a, taken as 0 where a == 0 (the limit for b > 0).
          Tensor zero_base = eq(av, scalar_of(av, 0.0, av.dtype()));
          Tensor safe = where(zero_base, ones({}, {.dtype = av.dtype(), .device = av.device()}), av);
          gb = where(zero_base, scalar_of(g, 0.0, g.dtype()), mul(g, mul(pow(av, bv), log(safe))));
        }
        break;
      }
      case BinaryOp::maximum:
      case BinaryOp::minimum: {
        Tensor av = a.unpack(nm), bv = b.unpack(nm);
        // Ties split the gradient evenly, like PyTorch.
        Tensor wins = op == BinaryOp::maximum ? gt(av, bv) : lt(av, bv);
        Tensor share = where(wins, scalar_of(g, 1.0, g.dtype()),
                             where(eq(av, bv), scalar_of(g, 0.5, g.dtype()), scalar_of(g, 0.0, g.dtype())));
        if (needs_input_grad(0)) ga = mul(g, share);
        if (needs_input_grad(1)) gb = sub(g, mul(g, share));
        break;
      }
      default: TS_ASSERT(false);
    }
    std::vector<Tensor> out_grads(2);
    if (needs_input_grad(0)) out_grads[0] = reduce_grad(ga, a_shape, a_dtype);
    if (needs_input_grad(1)) out_grads[1] = reduce_grad(gb, b_shape, b_dtype);
    return out_grads;
  }
};

Tensor binary_op(BinaryOp op, const Tensor& a, const Tensor& b) {
  const char* nm = op_name(op);
  check_defined(nm, a, "the first operand");
  check_defined(nm, b, "the second operand");
  check_same_device(nm, a, b);
  DType dtype = promote_types(a.dtype(), b.dtype());
  // True division (and pow, computed in floating point) of integers gives f32, like torch.div.
  if (op == BinaryOp::div || op == BinaryOp::pow) dtype = float_result_type(dtype);
  TS_CHECK(dtype != DType::b8, nm, "expected numeric operands, got ", a.describe(), " and ", b.describe(),
           " (convert bool tensors with to_dtype first)");
  Shape shape = broadcast_shapes(a.shape(), b.shape(), nm);
  // Converted operands keep their history (to_dtype) when they are saved for a differentiable backward.
  const bool track = autograd::any_requires_grad({&a, &b});
  Tensor ac = track ? to_dtype(a, dtype) : cast(a, dtype), bc = track ? to_dtype(b, dtype) : cast(b, dtype);
  Tensor out = new_empty(a, shape, dtype);
  kernels::binary(op, expand_to(ac, shape), expand_to(bc, shape), out);
  if (!is_floating(dtype)) return out;
  if (auto node = make_node<BinaryBackward>({&a, &b})) {
    node->op = op;
    node->a_shape = a.shape();
    node->b_shape = b.shape();
    node->a_dtype = a.dtype();
    node->b_dtype = b.dtype();
    const bool ga = node->needs_input_grad(0), gb = node->needs_input_grad(1);
    switch (op) {
      case BinaryOp::mul:
        if (ga) node->b = SavedTensor(bc);
        if (gb) node->a = SavedTensor(ac);
        break;
      case BinaryOp::div:
        node->b = SavedTensor(bc);
        if (gb) node->a = SavedTensor(ac);
        break;
      case BinaryOp::pow:
      case BinaryOp::maximum:
      case BinaryOp::minimum:
        node->a = SavedTensor(ac);
        node->b = SavedTensor(bc);
        break;
      default: break;
    }
    autograd::set_history(out, node);
  }
  return out;
}

// d(x^p)/dx = p x^(p-1), with the exponent a constant.
struct PowScalarBackward final : Node {
  SavedTensor x;
  double exponent = 1.0;
  DType x_dtype = DType::f32;
  std::string name() const override { return "PowScalarBackward"; }
  void release_saved() override { x.reset(); }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    Tensor xv = x.unpack("pow");
    Tensor gx;
    if (exponent == 0.0) {
      gx = mul(g, 0.0);
    } else if (exponent == 1.0) {
      gx = g;
    } else if (exponent == 2.0) {
      gx = mul(g, mul(xv, 2.0));
    } else {
      gx = mul(g, mul(pow(xv, exponent - 1.0), exponent));
    }
    return {gx.dtype() == x_dtype ? gx : to_dtype(gx, x_dtype)};
  }
};

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::add, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::sub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::div, a, b); }
Tensor pow(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::pow, a, b); }
Tensor maximum(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::maximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::minimum, a, b); }

Tensor add(const Tensor& a, double b) { return add(a, scalar_like(a, b)); }
Tensor sub(const Tensor& a, double b) { return sub(a, scalar_like(a, b)); }
Tensor mul(const Tensor& a, double b) { return mul(a, scalar_like(a, b)); }
Tensor div(const Tensor& a, double b) { return div(a, scalar_like(a, b)); }

Tensor pow(const Tensor& a, double exponent) {
  check_defined("pow", a);
  // Powers are computed in floating point: integer bases give f32.
  DType dtype = float_result_type(a.dtype());
  Tensor ac = cast(a, dtype);
  Tensor out = new_empty(a, a.shape(), dtype);
  kernels::binary(BinaryOp::pow, ac, expand_to(scalar_of(a, exponent, dtype), a.shape()), out);
  if (auto node = make_node<PowScalarBackward>({&a})) {
    node->x = SavedTensor(ac);
    node->exponent = exponent;
    node->x_dtype = a.dtype();
    autograd::set_history(out, node);
  }
  return out;
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, double b) { return add(a, b); }
Tensor operator-(const Tensor& a, double b) { return sub(a, b); }
Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
Tensor operator/(const Tensor& a, double b) { return div(a, b); }
Tensor operator+(double a, const Tensor& b) { return add(b, a); }
Tensor operator-(double a, const Tensor& b) { return sub(ops_detail::scalar_like(b, a), b); }
Tensor operator*(double a, const Tensor& b) { return mul(b, a); }
Tensor operator/(double a, const Tensor& b) { return div(ops_detail::scalar_like(b, a), b); }
Tensor operator-(const Tensor& x) { return neg(x); }

}  // namespace tessera

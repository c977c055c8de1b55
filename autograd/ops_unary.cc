// Differentiable unary math (exp, log, tanh, gelu, ...). Integer inputs to transcendental functions
// become f32, like PyTorch. Without create_graph the activations' backward runs one fused kernel;
// with it the same formula is built from ops, so higher-order gradients exist.
#include <cmath>
#include <numbers>

#include "autograd/ops_internal.h"
#include "kernels/kernels.h"

namespace tessera {
namespace {

using autograd::make_node;
using autograd::Node;
using autograd::SavedTensor;
using kernels::BinaryOp;
using kernels::UnaryOp;
using namespace ops_detail;

const char* op_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::neg: return "neg";
    case UnaryOp::abs: return "abs";
    case UnaryOp::exp: return "exp";
    case UnaryOp::log: return "log";
    case UnaryOp::sqrt: return "sqrt";
    case UnaryOp::rsqrt: return "rsqrt";
    case UnaryOp::tanh: return "tanh";
    case UnaryOp::sigmoid: return "sigmoid";
    case UnaryOp::relu: return "relu";
    case UnaryOp::gelu_tanh: return "gelu";
    case UnaryOp::gelu_erf: return "gelu";
    case UnaryOp::silu: return "silu";
    case UnaryOp::sin: return "sin";
    case UnaryOp::cos: return "cos";
    case UnaryOp::reciprocal: return "reciprocal";
    case UnaryOp::square: return "square";
    case UnaryOp::sign: return "sign";
    case UnaryOp::logical_not: return "logical_not";
  }
  return "unary";
}

// Ops whose result keeps an integer dtype; the others compute in floating point.
bool keeps_integers(UnaryOp op) {
  return op == UnaryOp::neg || op == UnaryOp::abs || op == UnaryOp::square || op == UnaryOp::sign ||
         op == UnaryOp::relu;
}

Tensor raw_unary(UnaryOp op, const Tensor& x, DType dtype) {
  Tensor out = new_empty(x, x.shape(), dtype);
  kernels::unary(op, cast(x, dtype), out);
  return out;
}

// b * f'(a) through one backward-helper kernel (no graph).
Tensor fused_backward(BinaryOp op, const Tensor& a, const Tensor& g) {
  Tensor out = new_empty(g, g.shape(), g.dtype());
  kernels::binary(op, cast(a, g.dtype()), g, out);
  return out;
}

// 1 - t, differentiable.
Tensor rsub1(const Tensor& t) { return 1.0 - t; }

// The standard normal CDF, Phi(x) = gelu_erf(x) / x (1/2 at 0), differentiable: Phi' = pdf.
struct NormalCdfBackward final : Node {
  SavedTensor x;
  std::string name() const override { return "NormalCdfBackward"; }
  void release_saved() override { x.reset(); }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    Tensor xv = x.unpack("gelu");
    Tensor pdf = mul(exp(mul(square(xv), -0.5)), 1.0 / std::sqrt(2.0 * std::numbers::pi));
    return {mul(grads[0], pdf)};
  }
};

Tensor normal_cdf(const Tensor& x) {
  Tensor gelu_x = raw_unary(UnaryOp::gelu_erf, x, x.dtype());
  Tensor ratio = new_empty(x, x.shape(), x.dtype());
  kernels::binary(BinaryOp::div, gelu_x, x, ratio);
  Tensor out = new_empty(x, x.shape(), x.dtype());
  Tensor is_zero = new_empty(x, x.shape(), DType::b8);
  kernels::binary(BinaryOp::eq, x, expand_to(scalar_of(x, 0.0, x.dtype()), x.shape()), is_zero);
  kernels::where(is_zero, expand_to(scalar_of(x, 0.5, x.dtype()), x.shape()), ratio, out);
  if (auto node = make_node<NormalCdfBackward>({&x})) {
    node->x = SavedTensor(x);
    autograd::set_history(out, node);
  }
  return out;
}

struct UnaryBackward final : Node {
  UnaryOp op = UnaryOp::neg;
  SavedTensor x, y;  // input and/or output, as the formula needs
  DType x_dtype = DType::f32;
  std::string name() const override { return std::string(op_name(op)) + "Backward"; }
  void release_saved() override {
    x.reset();
    y.reset();
  }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    Tensor gx = formula(grads[0]);
    return {gx.dtype() == x_dtype ? gx : to_dtype(gx, x_dtype)};
  }

 private:
  Tensor formula(const Tensor& g) {
    const char* nm = op_name(op);
    const bool graph = autograd::is_grad_enabled();  // create_graph: compose differentiable ops
    switch (op) {
      case UnaryOp::neg: return neg(g);
      case UnaryOp::abs: return mul(g, sign(x.unpack(nm)));
      case UnaryOp::exp: return mul(g, y.unpack(nm));
      case UnaryOp::log: return div(g, x.unpack(nm));
      case UnaryOp::sqrt: return div(mul(g, 0.5), y.unpack(nm));
      case UnaryOp::rsqrt: {
        Tensor yv = y.unpack(nm);
        return mul(g, mul(mul(yv, square(yv)), -0.5));
      }
      case UnaryOp::square: return mul(g, mul(x.unpack(nm), 2.0));
      case UnaryOp::reciprocal: return neg(mul(g, square(y.unpack(nm))));
      case UnaryOp::sin: return mul(g, cos(x.unpack(nm)));
      case UnaryOp::cos: return neg(mul(g, sin(x.unpack(nm))));
      case UnaryOp::tanh: {
        Tensor yv = y.unpack(nm);
        if (!graph) return fused_backward(BinaryOp::tanh_backward, yv, g);
        return mul(g, rsub1(square(yv)));
      }
      case UnaryOp::sigmoid: {
        Tensor yv = y.unpack(nm);
        if (!graph) return fused_backward(BinaryOp::sigmoid_backward, yv, g);
        return mul(g, mul(yv, rsub1(yv)));
      }
      case UnaryOp::relu: {
        Tensor xv = x.unpack(nm);
        if (!graph) return fused_backward(BinaryOp::relu_backward, xv, g);
        return where(gt(xv, scalar_of(xv, 0.0, xv.dtype())), g, scalar_of(g, 0.0, g.dtype()));
      }
      case UnaryOp::silu: {
        Tensor xv = x.unpack(nm);
        if (!graph) return fused_backward(BinaryOp::silu_backward, xv, g);
        Tensor s = sigmoid(xv);
        return mul(g, mul(s, add(mul(xv, rsub1(s)), 1.0)));
      }
      case UnaryOp::gelu_tanh: {
        Tensor xv = x.unpack(nm);
        if (!graph) return fused_backward(BinaryOp::gelu_tanh_backward, xv, g);
        // gelu = x/2 (1 + tanh(u)), u = k (x + c x^3): d/dx = (1 + t)/2 + x/2 (1 - t^2) k (1 + 3c x^2).
        const double k = std::sqrt(2.0 / std::numbers::pi), c = 0.044715;
        Tensor x2 = square(xv);
        Tensor t = tanh(mul(mul(xv, add(mul(x2, c), 1.0)), k));
        Tensor du = mul(add(mul(x2, 3.0 * c), 1.0), k);
        Tensor d = add(mul(add(t, 1.0), 0.5), mul(mul(mul(xv, 0.5), rsub1(square(t))), du));
        return mul(g, d);
      }
      case UnaryOp::gelu_erf: {
        Tensor xv = x.unpack(nm);
        if (!graph) return fused_backward(BinaryOp::gelu_erf_backward, xv, g);
        // gelu = x Phi(x): d/dx = Phi(x) + x pdf(x).
        Tensor pdf = mul(exp(mul(square(xv), -0.5)), 1.0 / std::sqrt(2.0 * std::numbers::pi));
        return mul(g, add(normal_cdf(xv), mul(xv, pdf)));
      }
      case UnaryOp::sign:
      case UnaryOp::logical_not: break;
    }
    TS_ASSERT(false);
    return Tensor();
  }
};

// What each formula reads: the input, the output, or neither.
enum class Needs { none, input, output };
Needs saved_for(UnaryOp op) {
  switch (op) {
    case UnaryOp::neg: return Needs::none;
    case UnaryOp::exp:
    case UnaryOp::sqrt:
    case UnaryOp::rsqrt:
    case UnaryOp::reciprocal:
    case UnaryOp::tanh:
    case UnaryOp::sigmoid: return Needs::output;
    default: return Needs::input;
  }
}

Tensor unary_op(UnaryOp op, const Tensor& x) {
  const char* nm = op_name(op);
  check_defined(nm, x);
  DType dtype = keeps_integers(op) ? x.dtype() : float_result_type(x.dtype());
  TS_CHECK(dtype != DType::b8, nm, "expected a numeric tensor, got ", x.describe());
  const bool track = autograd::any_requires_grad({&x});
  Tensor xc = track ? to_dtype(x, dtype) : cast(x, dtype);
  Tensor out = raw_unary(op, xc, dtype);
  if (op == UnaryOp::sign) return out;  // gradient 0 almost everywhere: record nothing
  if (auto node = make_node<UnaryBackward>({&x})) {
    node->op = op;
    node->x_dtype = x.dtype();
    autograd::set_history(out, node);
    Needs needs = saved_for(op);
    if (needs == Needs::input) node->x = SavedTensor(xc);
    if (needs == Needs::output) node->y = SavedTensor(out, /*is_output=*/true);
  }
  return out;
}

}  // namespace

Tensor neg(const Tensor& x) { return unary_op(UnaryOp::neg, x); }
Tensor abs(const Tensor& x) { return unary_op(UnaryOp::abs, x); }
Tensor exp(const Tensor& x) { return unary_op(UnaryOp::exp, x); }
Tensor log(const Tensor& x) { return unary_op(UnaryOp::log, x); }
Tensor sqrt(const Tensor& x) { return unary_op(UnaryOp::sqrt, x); }
Tensor rsqrt(const Tensor& x) { return unary_op(UnaryOp::rsqrt, x); }
Tensor square(const Tensor& x) { return unary_op(UnaryOp::square, x); }
Tensor reciprocal(const Tensor& x) { return unary_op(UnaryOp::reciprocal, x); }
Tensor sin(const Tensor& x) { return unary_op(UnaryOp::sin, x); }
Tensor cos(const Tensor& x) { return unary_op(UnaryOp::cos, x); }
Tensor tanh(const Tensor& x) { return unary_op(UnaryOp::tanh, x); }
Tensor sigmoid(const Tensor& x) { return unary_op(UnaryOp::sigmoid, x); }
Tensor relu(const Tensor& x) { return unary_op(UnaryOp::relu, x); }
Tensor silu(const Tensor& x) { return unary_op(UnaryOp::silu, x); }
Tensor sign(const Tensor& x) { return unary_op(UnaryOp::sign, x); }

Tensor gelu(const Tensor& x, const std::string& approximate) {
  TS_CHECK(approximate == "tanh" || approximate == "none", "gelu",
           "expected approximate \"tanh\" or \"none\", got \"", approximate, "\"");
  return unary_op(approximate == "tanh" ? UnaryOp::gelu_tanh : UnaryOp::gelu_erf, x);
}

}  // namespace tessera

// Comparisons and logic (bool results, no gradient), where / masked_fill / clamp (gradients flow to
// the selected values), and the in-place add_ / mul_.
#include <cmath>
#include <limits>

#include "autograd/ops_internal.h"
#include "kernels/kernels.h"

namespace tessera {
namespace {

using autograd::make_node;
using autograd::Node;
using autograd::SavedTensor;
using kernels::BinaryOp;
using namespace ops_detail;

Tensor compare(BinaryOp op, const char* nm, const Tensor& a, const Tensor& b) {
  check_defined(nm, a, "the first operand");
  check_defined(nm, b, "the second operand");
  check_same_device(nm, a, b);
  DType dtype = promote_types(a.dtype(), b.dtype());
  Shape shape = broadcast_shapes(a.shape(), b.shape(), nm);
  Tensor out = new_empty(a, shape, DType::b8);
  kernels::binary(op, expand_to(cast(a, dtype), shape), expand_to(cast(b, dtype), shape), out);
  return out;
}

struct WhereBackward final : Node {
  SavedTensor cond;
  Shape a_shape, b_shape;
  DType a_dtype = DType::f32, b_dtype = DType::f32;
  std::string name() const override { return "WhereBackward"; }
  void release_saved() override { cond.reset(); }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    Tensor c = cond.unpack("where");
    Tensor zero = scalar_of(g, 0.0, g.dtype());
    std::vector<Tensor> out(3);  // cond gets none
    if (needs_input_grad(1)) out[1] = reduce_grad(where(c, g, zero), a_shape, a_dtype);
    if (needs_input_grad(2)) out[2] = reduce_grad(where(c, zero, g), b_shape, b_dtype);
    return out;
  }
};

struct ClampBackward final : Node {
  SavedTensor pass;  // bool: lo <= x <= hi
  DType x_dtype = DType::f32;
  std::string name() const override { return "ClampBackward"; }
  void release_saved() override { pass.reset(); }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    Tensor gx = where(pass.unpack("clamp"), g, scalar_of(g, 0.0, g.dtype()));
    return {gx.dtype() == x_dtype ? gx : to_dtype(gx, x_dtype)};
  }
};

// The in-place result as a new output of the tensor's history: grad_self = g * self_scale,
// grad_other = sum_to(g * other_scale).
struct InplaceBackward final : Node {
  std::string op;
  double self_scale = 1.0, other_scale = 1.0;
  Shape other_shape;
  DType self_dtype = DType::f32, other_dtype = DType::f32;
  std::string name() const override { return op + "Backward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    std::vector<Tensor> out(next_edges.size());
    if (needs_input_grad(0)) {
      Tensor gs = self_scale == 1.0 ? g : mul(g, self_scale);
      out[0] = gs.dtype() == self_dtype ? gs : to_dtype(gs, self_dtype);
    }
    if (needs_input_grad(1)) out[1] = reduce_grad(other_scale == 1.0 ? g : mul(g, other_scale), other_shape, other_dtype);
    return out;
  }
};

void check_inplace(const char* op, const Tensor& self) {
  check_defined(op, self, "self");
  TS_CHECK(!(autograd::is_grad_enabled() && self.is_leaf() && self.requires_grad()), op,
           "expected a tensor that may be modified in place, got a leaf that requires grad while grad mode "
           "is on; update it under NoGradGuard (optimizer steps) or clone() it first");
  TS_CHECK(is_floating(self.dtype()) || self.dtype() == DType::i32 || self.dtype() == DType::i64, op,
           "expected a numeric tensor, got ", self.describe());
  for (int64_t d = 0; d < self.dim(); ++d)
    TS_CHECK(self.shape()[size_t(d)] <= 1 || self.strides()[size_t(d)] != 0, op,
             "expected a tensor whose elements do not share memory, got an expanded view with strides ",
             shape_str(self.strides()));
}

}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) { return compare(BinaryOp::eq, "eq", a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare(BinaryOp::ne, "ne", a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare(BinaryOp::lt, "lt", a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return compare(BinaryOp::le, "le", a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare(BinaryOp::gt, "gt", a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare(BinaryOp::ge, "ge", a, b); }
Tensor logical_and(const Tensor& a, const Tensor& b) { return compare(BinaryOp::logical_and, "logical_and", a, b); }
Tensor logical_or(const Tensor& a, const Tensor& b) { return compare(BinaryOp::logical_or, "logical_or", a, b); }

Tensor logical_not(const Tensor& x) {
  check_defined("logical_not", x);
  Tensor out = new_empty(x, x.shape(), DType::b8);
  kernels::unary(kernels::UnaryOp::logical_not, x, out);
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_defined("where", cond, "the condition");
  check_defined("where", a, "the first operand");
  check_defined("where", b, "the second operand");
  TS_CHECK(cond.dtype() == DType::b8, "where", "expected a bool condition, got ", cond.describe());
  check_same_device("where", cond, a);
  check_same_device("where", a, b);
  DType dtype = promote_types(a.dtype(), b.dtype());
  Shape shape = broadcast_shapes(cond.shape(), broadcast_shapes(a.shape(), b.shape(), "where"), "where");
  Tensor out = new_empty(a, shape, dtype);
  kernels::where(expand_to(cond, shape), expand_to(cast(a, dtype), shape), expand_to(cast(b, dtype), shape), out);
  if (!is_floating(dtype)) return out;
  if (auto node = make_node<WhereBackward>({&cond, &a, &b})) {
    node->cond = SavedTensor(cond);
    node->a_shape = a.shape();
    node->b_shape = b.shape();
    node->a_dtype = a.dtype();
    node->b_dtype = b.dtype();
    autograd::set_history(out, node);
  }
  return out;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  check_defined("masked_fill", x);
  check_defined("masked_fill", mask, "the mask");
  TS_CHECK(mask.dtype() == DType::b8, "masked_fill", "expected a bool mask, got ", mask.describe());
  TS_CHECK(broadcast_shapes(x.shape(), mask.shape(), "masked_fill") == x.shape(), "masked_fill",
           "expected a mask broadcastable to ", shape_str(x.shape()), ", got ", shape_str(mask.shape()));
  return where(mask, scalar_of(x, value, x.dtype()), x);
}

Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi) {
  check_defined("clamp", x);
  TS_CHECK(x.dtype() != DType::b8, "clamp", "expected a numeric tensor, got ", x.describe());
  TS_CHECK(!lo || !hi || *lo <= *hi, "clamp", "expected lo <= hi, got ", *lo, " and ", *hi);
  DType dtype = x.dtype();
  if (lo) dtype = scalar_result_type(dtype, *lo);
  if (hi) dtype = promote_types(dtype, scalar_result_type(x.dtype(), *hi));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor out = new_empty(x, x.shape(), dtype);
  Tensor xc = cast(x, dtype);
  kernels::clamp(xc, lo.value_or(nan), hi.value_or(nan), out);
  if (auto node = make_node<ClampBackward>({&x})) {
    autograd::NoGradGuard no_grad;
    Tensor pass = ones(x.shape(), {.dtype = DType::b8, .device = x.device()});
    if (lo) pass = logical_and(pass, ge(xc, scalar_of(xc, *lo, dtype)));
    if (hi) pass = logical_and(pass, le(xc, scalar_of(xc, *hi, dtype)));
    node->pass = SavedTensor(pass);
    node->x_dtype = x.dtype();
    autograd::set_history(out, node);
  }
  return out;
}

const Tensor& add_(const Tensor& self, const Tensor& other, double alpha) {
  check_inplace("add_", self);
  check_defined("add_", other, "other");
  check_same_device("add_", self, other);
  TS_CHECK(broadcast_shapes(self.shape(), other.shape(), "add_") == self.shape(), "add_",
           "expected other broadcastable to ", shape_str(self.shape()), ", got ", shape_str(other.shape()));
  TS_CHECK(is_floating(self.dtype()) || !is_floating(other.dtype()), "add_", "expected other of an integer dtype for ",
           self.describe(), ", got ", other.describe());
  Tensor o = cast(other, self.dtype());
  if (alpha != 1.0) {
    Tensor scaled = new_empty(self, o.shape(), self.dtype());
    kernels::binary(BinaryOp::mul, o, expand_to(scalar_of(self, alpha, self.dtype()), o.shape()), scaled);
    o = scaled;
  }
  kernels::binary(BinaryOp::add, self, expand_to(o, self.shape()), self);
  self.bump_version();
  if (auto node = make_node<InplaceBackward>({&self, &other})) {
    node->op = "add_";
    node->other_scale = alpha;
    node->other_shape = other.shape();
    node->self_dtype = self.dtype();
    node->other_dtype = other.dtype();
    autograd::set_history(self, node);
  }
  return self;
}

const Tensor& mul_(const Tensor& self, double value) {
  check_inplace("mul_", self);
  TS_CHECK(is_floating(self.dtype()) || value == std::floor(value), "mul_", "expected an integer factor for ",
           self.describe(), ", got ", value);
  kernels::binary(BinaryOp::mul, self, expand_to(scalar_of(self, value, self.dtype()), self.shape()), self);
  self.bump_version();
  if (auto node = make_node<InplaceBackward>({&self})) {
    node->op = "mul_";
    node->self_scale = value;
    node->self_dtype = self.dtype();
    autograd::set_history(self, node);
  }
  return self;
}

}  // namespace tessera

// Differentiable views (reshape, permute, slice, select, expand, ...), contiguous and to_dtype.
// Outputs share storage with the input like the raw Tensor members; each records how to map the
// output's gradient back onto the input's shape.
#include <numeric>

#include "autograd/ops_internal.h"

namespace tessera {
namespace {

using autograd::make_node;
using autograd::Node;
using namespace ops_detail;

// Any shape-only change: the gradient is reshaped back.
struct ReshapeBackward final : Node {
  Shape x_shape;
  std::string name() const override { return "ReshapeBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override { return {reshape(grads[0], x_shape)}; }
};

struct PermuteBackward final : Node {
  std::vector<int64_t> inverse;
  std::string name() const override { return "PermuteBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override { return {permute(grads[0], inverse)}; }
};

struct ExpandBackward final : Node {
  Shape x_shape;
  std::string name() const override { return "ExpandBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override { return {sum_to(grads[0], x_shape)}; }
};

// slice / narrow / select: the gradient goes into zeros at the viewed positions.
struct ViewOfBackward final : Node {
  std::string op;
  Shape x_shape;
  ViewFn take;
  std::string name() const override { return op + "Backward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {view_scatter(grads[0], x_shape, take)};
  }
};

struct IdentityBackward final : Node {
  std::string name() const override { return "ContiguousBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override { return {grads[0]}; }
};

struct ToDtypeBackward final : Node {
  DType x_dtype = DType::f32;
  std::string name() const override { return "ToDtypeBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override { return {to_dtype(grads[0], x_dtype)}; }
};

Tensor record_reshape(const Tensor& x, Tensor out) {
  if (auto node = make_node<ReshapeBackward>({&x})) {
    node->x_shape = x.shape();
    autograd::set_history(out, node);
  }
  return out;
}

Tensor record_view_of(const char* op, const Tensor& x, Tensor out, ViewFn take) {
  if (auto node = make_node<ViewOfBackward>({&x})) {
    node->op = op;
    node->x_shape = x.shape();
    node->take = std::move(take);
    autograd::set_history(out, node);
  }
  return out;
}

}  // namespace

Tensor reshape(const Tensor& x, const Shape& shape) {
  check_defined("reshape", x);
  return record_reshape(x, x.reshape(shape));
}

Tensor view(const Tensor& x, const Shape& shape) {
  check_defined("view", x);
  return record_reshape(x, x.view(shape));
}

Tensor flatten(const Tensor& x, int64_t start, int64_t end) {
  check_defined("flatten", x);
  return record_reshape(x, x.flatten(start, end));
}

Tensor squeeze(const Tensor& x, int64_t dim) {
  check_defined("squeeze", x);
  return record_reshape(x, x.squeeze(dim));
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  check_defined("unsqueeze", x);
  return record_reshape(x, x.unsqueeze(dim));
}

Tensor permute(const Tensor& x, const std::vector<int64_t>& dims) {
  check_defined("permute", x);
  Tensor out = x.permute(dims);
  if (auto node = make_node<PermuteBackward>({&x})) {
    node->inverse.assign(dims.size(), 0);
    for (size_t i = 0; i < dims.size(); ++i) node->inverse[size_t(wrap_dim(dims[i], x.dim(), "permute"))] = int64_t(i);
    autograd::set_history(out, node);
  }
  return out;
}

Tensor transpose(const Tensor& x, int64_t d0, int64_t d1) {
  check_defined("transpose", x);
  if (x.dim() == 0) return x;
  std::vector<int64_t> dims(size_t(x.dim()));
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[size_t(wrap_dim(d0, x.dim(), "transpose"))], dims[size_t(wrap_dim(d1, x.dim(), "transpose"))]);
  return permute(x, dims);
}

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  check_defined("slice", x);
  Tensor out = x.slice(dim, start, end, step);
  return record_view_of("slice", x, out, [=](const Tensor& t) { return slice(t, dim, start, end, step); });
}

Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  check_defined("narrow", x);
  Tensor out = x.narrow(dim, start, length);
  return record_view_of("narrow", x, out, [=](const Tensor& t) { return narrow(t, dim, start, length); });
}

Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  check_defined("select", x);
  Tensor out = x.select(dim, index);
  return record_view_of("select", x, out, [=](const Tensor& t) { return select(t, dim, index); });
}

Tensor expand(const Tensor& x, const Shape& shape) {
  check_defined("expand", x);
  Tensor out = x.expand(shape);
  if (out.shape() == x.shape()) return record_reshape(x, out);
  if (auto node = make_node<ExpandBackward>({&x})) {
    node->x_shape = x.shape();
    autograd::set_history(out, node);
  }
  return out;
}

Tensor contiguous(const Tensor& x) {
  check_defined("contiguous", x);
  if (x.is_contiguous()) return x;
  Tensor out = x.clone();
  if (auto node = make_node<IdentityBackward>({&x})) autograd::set_history(out, node);
  return out;
}

Tensor to_dtype(const Tensor& x, DType dtype) {
  check_defined("to_dtype", x);
  if (x.dtype() == dtype) return x;
  Tensor out = x.to(dtype);
  if (!is_floating(dtype)) return out;  // integer results carry no gradient
  if (auto node = make_node<ToDtypeBackward>({&x})) {
    node->x_dtype = x.dtype();
    autograd::set_history(out, node);
  }
  return out;
}

}  // namespace tessera

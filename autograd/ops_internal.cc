// Shared op helpers (see ops_internal.h).
#include "autograd/ops_internal.h"

#include <algorithm>
#include <cmath>

#include "kernels/kernels.h"

namespace tessera::ops_detail {

using autograd::make_node;
using autograd::Node;
using autograd::SavedTensor;

void check_defined(const char* op, const Tensor& t, const char* what) {
  TS_CHECK(t.defined(), op, "expected a defined tensor for ", what, ", got an undefined one");
}

void check_same_device(const char* op, const Tensor& a, const Tensor& b) {
  TS_CHECK(a.device() == b.device(), op, "expected all tensors on one device, got ", a.device().str(),
           " and ", b.device().str());
}

DType scalar_result_type(DType t, double value) {
  if (is_floating(t)) return t;
  if (value != std::floor(value) || !std::isfinite(value)) return DType::f32;
  return t == DType::b8 ? DType::i64 : t;
}

Tensor scalar_like(const Tensor& like, double value) {
  return scalar_of(like, value, scalar_result_type(like.dtype(), value));
}

Tensor scalar_of(const Tensor& like, double value, DType dtype) {
  return scalar_tensor(value, {.dtype = dtype, .device = like.device()});
}

Tensor reduce_grad(const Tensor& g, const Shape& shape, DType from) {
  Tensor r = sum_to(g, shape);
  return r.dtype() == from ? r : to_dtype(r, from);
}

std::vector<int64_t> reduction_dims(const char* op, const std::vector<int64_t>& dims, int64_t ndim) {
  std::vector<int64_t> out;
  if (dims.empty()) {
    for (int64_t d = 0; d < ndim; ++d) out.push_back(d);
    return out;
  }
  for (int64_t d : dims) out.push_back(wrap_dim(d, ndim, op));
  std::sort(out.begin(), out.end());
  TS_CHECK(std::adjacent_find(out.begin(), out.end()) == out.end(), op, "expected distinct dims, got ",
           shape_str(dims));
  // A 0-d tensor accepts dim 0 / -1 but has nothing to reduce.
  if (ndim == 0) out.clear();
  return out;
}

Shape keepdim_shape(const Shape& shape, const std::vector<int64_t>& dims) {
  Shape s = shape;
  for (int64_t d : dims) s[size_t(d)] = 1;
  return s;
}

void check_index_range(const char* op, const Tensor& index, int64_t size, int64_t dim) {
  if (index.numel() == 0) return;
  std::vector<int64_t> all;
  for (int64_t d = 0; d < index.dim(); ++d) all.push_back(d);
  Shape one(size_t(index.dim()), 1);
  Tensor lo = new_empty(index, one, index.dtype()), hi = new_empty(index, one, index.dtype());
  if (all.empty()) {
    lo = hi = index;
  } else {
    kernels::reduce(kernels::ReduceOp::min, index, all, lo);
    kernels::reduce(kernels::ReduceOp::max, index, all, hi);
  }
  int64_t vmin = int64_t(lo.item()), vmax = int64_t(hi.item());
  TS_CHECK(vmin >= 0 && vmax < size, op, "index ", vmin < 0 ? vmin : vmax, " is out of range for dim ", dim,
           " of size ", size);
}

namespace {

struct ViewScatterBackward final : Node {
  ViewFn take;
  std::string name() const override { return "ViewScatterBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override { return {take(grads[0])}; }
};

struct ScatterAddBackward final : Node {
  int64_t dim = 0;
  Tensor index;  // integer, never modified by ops
  std::string name() const override { return "ScatterAddBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override { return {gather(grads[0], dim, index)}; }
};

}  // namespace

Tensor view_scatter(const Tensor& g, const Shape& base_shape, ViewFn take) {
  Tensor out = zeros(base_shape, {.dtype = g.dtype(), .device = g.device()});
  {
    autograd::NoGradGuard no_grad;
    take(out).copy_(g);
  }
  if (auto node = make_node<ViewScatterBackward>({&g})) {
    node->take = std::move(take);
    autograd::set_history(out, node);
  }
  return out;
}

Tensor scatter_add_zeros(const Tensor& g, int64_t dim, const Tensor& index, const Shape& shape) {
  Tensor out = zeros(shape, {.dtype = g.dtype(), .device = g.device()});
  kernels::scatter_add(g, dim, index, out);
  if (auto node = make_node<ScatterAddBackward>({&g})) {
    node->dim = dim;
    node->index = index;
    autograd::set_history(out, node);
  }
  return out;
}

}  // namespace tessera::ops_detail

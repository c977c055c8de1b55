// Helpers shared by the op implementations in autograd/ops_*.cc: input checks, dtype promotion,
// output allocation and the differentiable "scatter a view's gradient into zeros" used by backward
// formulas of view ops. Internal to autograd/.
#pragma once

#include <functional>
#include <string>

#include "autograd/node.h"
#include "autograd/ops.h"

namespace tessera::ops_detail {

// Throws "[op] expected a defined tensor for <what>, got an undefined one".
void check_defined(const char* op, const Tensor& t, const char* what = "the input");
// Throws "[op] expected all tensors on one device, got cpu and cuda:0".
void check_same_device(const char* op, const Tensor& a, const Tensor& b);
// The dtype a double scalar takes next to a tensor of dtype t (see the top of ops.h).
DType scalar_result_type(DType t, double value);
// A 0-d tensor holding value in the dtype scalar_result_type gives for `like`.
Tensor scalar_like(const Tensor& like, double value);
// A 0-d tensor of exactly dtype `dtype` on like's device.
Tensor scalar_of(const Tensor& like, double value, DType dtype);
// Raw conversion (no history) when the dtype differs.
inline Tensor cast(const Tensor& t, DType dtype) { return t.dtype() == dtype ? t : t.to(dtype); }
// Raw broadcast view (no history) when the shape differs.
inline Tensor expand_to(const Tensor& t, const Shape& shape) { return t.shape() == shape ? t : t.expand(shape); }
// A fresh contiguous tensor on like's device.
inline Tensor new_empty(const Tensor& like, const Shape& shape, DType dtype) {
  return empty(shape, {.dtype = dtype, .device = like.device()});
}
// Unary math on integers yields f32 (like PyTorch); floating dtypes are kept.
inline DType float_result_type(DType t) { return is_floating(t) ? t : DType::f32; }
// Gradient g of an input that was converted from dtype `from`: sum_to its shape, back to its dtype.
Tensor reduce_grad(const Tensor& g, const Shape& shape, DType from);
// Sorted, unique, wrapped dims; empty means all dims.
std::vector<int64_t> reduction_dims(const char* op, const std::vector<int64_t>& dims, int64_t ndim);
// x's shape with `dims` set to 1.
Shape keepdim_shape(const Shape& shape, const std::vector<int64_t>& dims);
// Throws when i64 index values fall outside [0, size).
void check_index_range(const char* op, const Tensor& index, int64_t size, int64_t dim);

// A differentiable function of a tensor that returns a view of it (slice, select, ...).
using ViewFn = std::function<Tensor(const Tensor&)>;
// zeros(base_shape) with take(zeros) = g: the gradient of a view op. Its own backward is take(gg),
// so view ops stay differentiable to any order.
Tensor view_scatter(const Tensor& g, const Shape& base_shape, ViewFn take);
// zeros(shape) with scatter_add(g, dim, index): gather's gradient, differentiable (its backward
// gathers).
Tensor scatter_add_zeros(const Tensor& g, int64_t dim, const Tensor& index, const Shape& shape);

}  // namespace tessera::ops_detail

// Joining and splitting along a dim: cat, stack, split, chunk. cat's gradient narrows back into
// pieces; split's multi-output node concatenates the pieces' gradients (zeros where none flowed).
#include <algorithm>
#include <numeric>

#include "autograd/ops_internal.h"

namespace tessera {
namespace {

using autograd::Node;
using namespace ops_detail;

struct CatBackward final : Node {
  int64_t dim = 0;
  std::vector<int64_t> sizes;
  std::vector<DType> dtypes;
  std::string name() const override { return "CatBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    std::vector<Tensor> out(sizes.size());
    int64_t offset = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (needs_input_grad(i)) {
        Tensor gi = narrow(grads[0], dim, offset, sizes[i]);
        out[i] = gi.dtype() == dtypes[i] ? gi : to_dtype(gi, dtypes[i]);
      }
      offset += sizes[i];
    }
    return out;
  }
};

// The dims of x from the largest stride to the smallest, when that order lays x out densely and
// differs from x's own; else empty.
std::vector<int64_t> dense_order(const Tensor& x) {
  std::vector<int64_t> order(size_t(x.dim()));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return x.strides()[size_t(a)] > x.strides()[size_t(b)];
  });
  const bool identity = std::is_sorted(order.begin(), order.end());
  if (identity || !x.permute(order).is_contiguous()) return {};
  return order;
}

// The pieces' gradients joined into one tensor with the memory layout of split's input: the
// gradient of a split of a permuted view (attention's q, k, v from the fused projection's
// (B, T, 3, H, D) output) then flows back through the permute and reshape as views, where a
// row-major join would be copied once more into the projection's layout.
struct SplitBackward final : Node {
  int64_t dim = 0;
  std::vector<Shape> shapes;
  std::vector<int64_t> order;  // dense_order of the input
  DType dtype = DType::f32;
  Device device = kCPU;
  std::string name() const override { return "SplitBackward"; }
  uint32_t num_outputs() const override { return uint32_t(shapes.size()); }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    for (size_t i = 0; i < grads.size(); ++i)
      if (!grads[i].defined()) grads[i] = zeros(shapes[i], {.dtype = dtype, .device = device});
    if (order.empty()) return {cat(grads, dim)};
    // Join in memory order, then view the result back in the input's dim order.
    std::vector<Tensor> in_order;
    for (const Tensor& g : grads) in_order.push_back(permute(g, order));
    const int64_t joined_dim = std::find(order.begin(), order.end(), dim) - order.begin();
    std::vector<int64_t> inverse(order.size());
    for (size_t i = 0; i < order.size(); ++i) inverse[size_t(order[i])] = int64_t(i);
    return {permute(cat(in_order, joined_dim), inverse)};
  }
};

}  // namespace

Tensor cat(const std::vector<Tensor>& xs, int64_t dim) {
  TS_CHECK(!xs.empty(), "cat", "expected at least one tensor, got none");
  for (size_t i = 0; i < xs.size(); ++i) check_defined("cat", xs[i], "an input");
  const Tensor& first = xs[0];
  TS_CHECK(first.dim() > 0, "cat", "expected tensors with at least one dim, got ", first.describe());
  const int64_t d = wrap_dim(dim, first.dim(), "cat");
  DType dtype = first.dtype();
  Shape shape = first.shape();
  shape[size_t(d)] = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Tensor& x = xs[i];
    check_same_device("cat", first, x);
    bool match = x.dim() == first.dim();
    for (int64_t k = 0; match && k < x.dim(); ++k)
      match = k == d || x.shape()[size_t(k)] == first.shape()[size_t(k)];
    TS_CHECK(match, "cat", "expected shapes that match except in dim ", d, ", got ", shape_str(first.shape()),
             " and ", shape_str(x.shape()), " (input ", i, ")");
    dtype = promote_types(dtype, x.dtype());
    shape[size_t(d)] += x.shape()[size_t(d)];
  }
  Tensor out = new_empty(first, shape, dtype);
  int64_t offset = 0;
  for (const Tensor& x : xs) {
    const int64_t n = x.shape()[size_t(d)];
    if (n > 0) out.narrow(d, offset, n).copy_(x);
    offset += n;
  }
  if (!is_floating(dtype)) return out;
  if (auto node = autograd::make_node_v<CatBackward>(xs)) {
    node->dim = d;
    for (const Tensor& x : xs) {
      node->sizes.push_back(x.shape()[size_t(d)]);
      node->dtypes.push_back(x.dtype());
    }
    autograd::set_history(out, node);
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& xs, int64_t dim) {
  TS_CHECK(!xs.empty(), "stack", "expected at least one tensor, got none");
  std::vector<Tensor> parts;
  for (size_t i = 0; i < xs.size(); ++i) {
    check_defined("stack", xs[i], "an input");
    TS_CHECK(xs[i].shape() == xs[0].shape(), "stack", "expected tensors of one shape, got ",
             shape_str(xs[0].shape()), " and ", shape_str(xs[i].shape()), " (input ", i, ")");
    parts.push_back(unsqueeze(xs[i], wrap_dim(dim, xs[0].dim() + 1, "stack")));
  }
  return cat(parts, dim);
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  check_defined("split", x);
  TS_CHECK(x.dim() > 0, "split", "expected a tensor with at least one dim, got ", x.describe());
  const int64_t d = wrap_dim(dim, x.dim(), "split");
  const int64_t n = x.shape()[size_t(d)];
  TS_CHECK(split_size > 0, "split", "expected a positive split size, got ", split_size);
  std::vector<Tensor> out;
  if (n == 0) out.push_back(x.narrow(d, 0, 0));
  for (int64_t start = 0; start < n; start += split_size) out.push_back(x.narrow(d, start, std::min(split_size, n - start)));
  auto node = autograd::make_node<SplitBackward>({&x});
  if (node) {
    node->dim = d;
    node->order = dense_order(x);
    node->dtype = x.dtype();
    node->device = x.device();
    for (uint32_t i = 0; i < out.size(); ++i) {
      node->shapes.push_back(out[i].shape());
      autograd::set_history(out[i], node, i);
    }
  }
  return out;
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  check_defined("chunk", x);
  TS_CHECK(chunks > 0, "chunk", "expected a positive number of chunks, got ", chunks);
  TS_CHECK(x.dim() > 0, "chunk", "expected a tensor with at least one dim, got ", x.describe());
  const int64_t n = x.size(dim);
  return split(x, std::max<int64_t>((n + chunks - 1) / chunks, 1), dim);
}

}  // namespace tessera

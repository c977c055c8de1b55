// gather and index_select. Index values are checked on the way in (kernels assume valid input);
// the gradient scatters back with scatter_add, itself differentiable (its backward gathers).
#include "autograd/ops_internal.h"
#include "kernels/kernels.h"

namespace tessera {
namespace {

using autograd::make_node;
using autograd::Node;
using autograd::SavedTensor;
using namespace ops_detail;

struct GatherBackward final : Node {
  int64_t dim = 0;
  Shape x_shape;
  SavedTensor index;
  std::string name() const override { return "GatherBackward"; }
  void release_saved() override { index.reset(); }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {scatter_add_zeros(grads[0], dim, index.unpack("gather"), x_shape)};
  }
};

Tensor as_i64_index(const char* op, const Tensor& index) {
  TS_CHECK(index.dtype() == DType::i64 || index.dtype() == DType::i32, op, "expected an i64 or i32 index, got ",
           index.describe());
  return cast(index, DType::i64);
}

}  // namespace

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  check_defined("gather", x);
  check_defined("gather", index, "the index");
  check_same_device("gather", x, index);
  Tensor idx = as_i64_index("gather", index);
  TS_CHECK(idx.dim() == x.dim(), "gather", "expected an index with as many dims as the input (", x.dim(),
           "), got ", idx.describe());
  const int64_t d = wrap_dim(dim, std::max<int64_t>(x.dim(), 1), "gather");
  for (int64_t k = 0; k < x.dim(); ++k)
    TS_CHECK(k == d || idx.shape()[size_t(k)] <= x.shape()[size_t(k)], "gather", "expected index size ",
             idx.shape()[size_t(k)], " <= input size ", x.shape()[size_t(k)], " in dim ", k, ", got index ",
             shape_str(idx.shape()), " for input ", shape_str(x.shape()));
  if (x.dim() > 0) check_index_range("gather", idx, x.shape()[size_t(d)], d);
  Tensor out = new_empty(x, idx.shape(), x.dtype());
  if (out.numel() > 0) kernels::gather(x, d, idx, out);
  if (auto node = make_node<GatherBackward>({&x})) {
    node->dim = d;
    node->x_shape = x.shape();
    node->index = SavedTensor(idx);
    autograd::set_history(out, node);
  }
  return out;
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  check_defined("index_select", x);
  check_defined("index_select", index, "the index");
  check_same_device("index_select", x, index);
  TS_CHECK(x.dim() > 0, "index_select", "expected a tensor with at least one dim, got ", x.describe());
  Tensor idx = as_i64_index("index_select", index);
  TS_CHECK(idx.dim() <= 1, "index_select", "expected a 1-D index, got ", idx.describe());
  const int64_t d = wrap_dim(dim, x.dim(), "index_select");
  check_index_range("index_select", idx, x.shape()[size_t(d)], d);
  // The same rows for every position of the other dims: a gather with the index broadcast.
  Shape view_shape(size_t(x.dim()), 1), out_shape = x.shape();
  view_shape[size_t(d)] = idx.numel();
  out_shape[size_t(d)] = idx.numel();
  return gather(x, d, idx.reshape(view_shape).expand(out_shape));
}

}  // namespace tessera

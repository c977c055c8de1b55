// The fused all-gather + linear of sequence parallelism (see gathered_linear.h). Its backward is
// built from public ops (region ops, matmul, sum), so under create_graph it is itself recorded.
#include "parallel/tensor/gathered_linear.h"

#include <algorithm>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/error.h"

namespace tessera::parallel::tensor {
namespace {

using autograd::Node;
using autograd::SavedTensor;

struct GatheredLinearBackward final : Node {
  SavedTensor x, weight;  // x: this rank's chunk (not the gathered input)
  CommPtr group;
  int64_t dim = 0;
  std::string name() const override { return "GatheredLinearBackward"; }
  bool always_run() const override { return true; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    std::vector<Tensor> out(3);
    Tensor g = std::move(grads[0]);  // (..., out) over the gathered rows
    if (g.dtype() != output_meta[0].dtype) g = to_dtype(g, output_meta[0].dtype);
    Tensor w = weight.unpack("gathered_linear");
    const int64_t out_f = w.size(0), in_f = w.size(1);
    Shape full_shape = g.shape();
    full_shape.back() = in_f;
    const int64_t rows = shape_numel(full_shape) / std::max<int64_t>(in_f, 1);
    Tensor g2 = reshape(g, {rows, out_f});
    // Every rank builds the same graph, so every rank takes the same collectives here.
    if (needs_input_grad(0))
      out[0] = reduce_scatter_to_region(reshape(matmul(g2, w), full_shape), dim, group);
    if (needs_input_grad(1)) {
      Tensor full = all_gather_to_region(x.unpack("gathered_linear"), dim, group);  // again
      out[1] = matmul(transpose(g2, 0, 1), reshape(full, {rows, in_f}));            // (out, in)
    }
    if (needs_input_grad(2)) out[2] = sum(g2, {0});
    return out;
  }
  void release_saved() override {
    x.reset();
    weight.reset();
  }
};

}  // namespace

Tensor gathered_linear(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t dim,
                       const CommPtr& group) {
  if (group == nullptr || group->size() == 1) return linear(x, weight, bias);
  TS_CHECK(x.defined() && weight.defined(), "gathered_linear",
           "expected a defined input and weight");
  TS_CHECK(x.dim() >= 2, "gathered_linear",
           "expected an input with a gathered dim and features, got ", x.describe());
  const int64_t d = wrap_dim(dim, x.dim(), "gathered_linear");
  TS_CHECK(d != x.dim() - 1, "gathered_linear",
           "expected to gather a dim other than the features (last), got dim ", dim, " of ",
           x.describe());
  const bool one_dtype =
      x.dtype() == weight.dtype() && (!bias.defined() || bias.dtype() == x.dtype());
  if (!one_dtype || !autograd::any_requires_grad({&x, &weight, &bias}))
    return linear(all_gather_to_region(x, d, group), weight, bias);
  Tensor y;
  {
    autograd::GradModeGuard no_grad(false);  // the gathered input dies with this scope
    y = linear(all_gather_to_region(x, d, group), weight, bias);
  }
  if (auto node = autograd::make_node<GatheredLinearBackward>({&x, &weight, &bias})) {
    node->x = SavedTensor(x);
    node->weight = SavedTensor(weight);
    node->group = group;
    node->dim = d;
    autograd::set_history(y, node);
    node->record_output(y);
  }
  return y;
}

}  // namespace tessera::parallel::tensor

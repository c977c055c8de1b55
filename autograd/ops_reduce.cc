// Differentiable reductions (sum, mean, amax/amin, var/std, norm), argmax/argmin and sum_to, the
// inverse of broadcasting that every backward formula uses.
#include <algorithm>
#include <cmath>

#include "autograd/ops_internal.h"
#include "kernels/kernels.h"

namespace tessera {
namespace {

using autograd::make_node;
using autograd::Node;
using autograd::SavedTensor;
using kernels::ReduceOp;
using namespace ops_detail;

// Runs the kernel into the keepdim shape; drops the reduced dims unless keepdim.
Tensor raw_reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, DType dtype,
                  double param = 0.0) {
  Shape keep = keepdim_shape(x.shape(), dims);
  Tensor out = new_empty(x, keep, dtype);
  if (dims.empty()) {
    out.copy_(x);  // a 0-d tensor: nothing to reduce
  } else {
    kernels::reduce(op, x, dims, out, param);
  }
  if (keepdim) return out;
  Shape s;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (!std::binary_search(dims.begin(), dims.end(), d)) s.push_back(x.shape()[size_t(d)]);
  return out.view(s);
}

int64_t reduced_count(const Shape& shape, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= shape[size_t(d)];
  return n;
}

// The reduction's common node: the gradient reshaped to the keepdim form and broadcast back.
struct ReduceBackward final : Node {
  ReduceOp op = ReduceOp::sum;
  Shape x_shape, keep_shape;
  std::vector<int64_t> dims;
  double param = 0.0;
  SavedTensor x, y;  // y: the output, for amax/amin, std and norm
  bool is_std = false;
  std::string name() const override { return "ReduceBackward"; }
  void release_saved() override {
    x.reset();
    y.reset();
  }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    Tensor g = reshape(grads[0], keep_shape);
    const double n = double(reduced_count(x_shape, dims));
    switch (op) {
      case ReduceOp::sum: return {expand(g, x_shape)};
      case ReduceOp::mean: return {expand(div(g, n), x_shape)};
      case ReduceOp::max:
      case ReduceOp::min: {
        Tensor xv = x.unpack("amax"), yv = reshape(y.unpack("amax"), keep_shape);
        Tensor hit = eq(xv, yv);  // ties share the gradient evenly
        Tensor count = sum(to_dtype(hit, g.dtype()), dims, /*keepdim=*/true);
        return {where(hit, div(g, count), scalar_of(g, 0.0, g.dtype()))};
      }
      case ReduceOp::var: {
        Tensor xv = x.unpack(is_std ? "std" : "var");
        Tensor centered = sub(xv, mean(xv, dims, /*keepdim=*/true));
        Tensor scale = div(g, n - param);
        if (is_std) scale = div(scale, reshape(y.unpack("std"), keep_shape));
        return {mul(centered, is_std ? scale : mul(scale, 2.0))};
      }
      case ReduceOp::norm: return {norm_grad(g)};
      default: break;
    }
    TS_ASSERT(false);
    return {};
  }

 private:
  // d||x||_p/dx = sign(x) |x|^(p-1) / ||x||^(p-1); 0 where the norm is 0; max-abs elements for inf.
  Tensor norm_grad(const Tensor& g) {
    Tensor xv = x.unpack("norm"), yv = reshape(y.unpack("norm"), keep_shape);
    Tensor zero = scalar_of(g, 0.0, g.dtype());
    if (std::isinf(param)) {
      Tensor hit = eq(abs(xv), yv);
      Tensor count = sum(to_dtype(hit, g.dtype()), dims, /*keepdim=*/true);
      return where(hit, mul(sign(xv), div(g, count)), zero);
    }
    Tensor nonzero = ne(yv, zero);
    Tensor safe_y = where(nonzero, yv, scalar_of(yv, 1.0, yv.dtype()));
    Tensor d;
    if (param == 1.0) {
      d = sign(xv);
    } else if (param == 2.0) {
      d = div(xv, safe_y);
    } else {
      d = mul(sign(xv), div(pow(abs(xv), param - 1.0), pow(safe_y, param - 1.0)));
    }
    return where(nonzero, mul(g, d), zero);
  }
};

Tensor reduction(ReduceOp op, const char* nm, const Tensor& x, const std::vector<int64_t>& dims_in, bool keepdim,
                 double param = 0.0, bool is_std = false) {
  check_defined(nm, x);
  std::vector<int64_t> dims = reduction_dims(nm, dims_in, x.dim());
  DType dtype = x.dtype();
  if (op == ReduceOp::sum && !is_floating(dtype)) dtype = DType::i64;  // integer sums in i64
  if (op == ReduceOp::mean || op == ReduceOp::var || op == ReduceOp::norm) dtype = float_result_type(dtype);
  TS_CHECK(dtype != DType::b8, nm, "expected a numeric tensor, got ", x.describe());
  if ((op == ReduceOp::max || op == ReduceOp::min) && x.numel() == 0)
    TS_FAIL(nm, "expected a non-empty tensor, got ", x.describe());
  const bool track = autograd::any_requires_grad({&x});
  Tensor xc = track ? to_dtype(x, dtype) : cast(x, dtype);
  Tensor out = raw_reduce(op, xc, dims, /*keepdim=*/true, dtype, param);
  if (is_std) {
    Tensor s = new_empty(out, out.shape(), dtype);
    kernels::unary(kernels::UnaryOp::sqrt, out, s);
    out = s;
  }
  Shape keep = out.shape();
  Tensor result = out;
  if (!keepdim) {
    Shape s;
    for (int64_t d = 0; d < x.dim(); ++d)
      if (!std::binary_search(dims.begin(), dims.end(), d)) s.push_back(x.shape()[size_t(d)]);
    result = out.view(s);
  }
  if (!is_floating(dtype)) return result;
  if (auto node = make_node<ReduceBackward>({&xc})) {
    node->op = op;
    node->x_shape = x.shape();
    node->keep_shape = keep;
    node->dims = dims;
    node->param = param;
    node->is_std = is_std;
    if (op != ReduceOp::sum && op != ReduceOp::mean) node->x = SavedTensor(xc);
    autograd::set_history(result, node);
    if (op == ReduceOp::max || op == ReduceOp::min || op == ReduceOp::norm || is_std)
      node->y = SavedTensor(result, /*is_output=*/true);
  }
  return result;
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduction(ReduceOp::sum, "sum", x, dims, keepdim);
}
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduction(ReduceOp::mean, "mean", x, dims, keepdim);
}
Tensor amax(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduction(ReduceOp::max, "amax", x, dims, keepdim);
}
Tensor amin(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduction(ReduceOp::min, "amin", x, dims, keepdim);
}
Tensor var(const Tensor& x, const std::vector<int64_t>& dims, int64_t correction, bool keepdim) {
  TS_CHECK(correction >= 0, "var", "expected a non-negative correction, got ", correction);
  return reduction(ReduceOp::var, "var", x, dims, keepdim, double(correction));
}
Tensor std(const Tensor& x, const std::vector<int64_t>& dims, int64_t correction, bool keepdim) {
  TS_CHECK(correction >= 0, "std", "expected a non-negative correction, got ", correction);
  return reduction(ReduceOp::var, "std", x, dims, keepdim, double(correction), /*is_std=*/true);
}
Tensor norm(const Tensor& x, double p, const std::vector<int64_t>& dims, bool keepdim) {
  TS_CHECK(p > 0, "norm", "expected p > 0, got ", p);
  return reduction(ReduceOp::norm, "norm", x, dims, keepdim, p);
}

namespace {
Tensor arg_reduce(ReduceOp op, const char* nm, const Tensor& x, int64_t dim, bool keepdim) {
  check_defined(nm, x);
  TS_CHECK(x.dtype() != DType::b8, nm, "expected a numeric tensor, got ", x.describe());
  if (x.dim() == 0) return zeros({}, {.dtype = DType::i64, .device = x.device()});
  int64_t d = wrap_dim(dim, x.dim(), nm);
  TS_CHECK(x.shape()[size_t(d)] > 0, nm, "expected a non-empty dim ", d, ", got ", x.describe());
  return raw_reduce(op, x, {d}, keepdim, DType::i64);
}
}  // namespace

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) { return arg_reduce(ReduceOp::argmax, "argmax", x, dim, keepdim); }
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim) { return arg_reduce(ReduceOp::argmin, "argmin", x, dim, keepdim); }

Tensor sum_to(const Tensor& x, const Shape& shape) {
  check_defined("sum_to", x);
  if (x.shape() == shape) return x;
  TS_CHECK(broadcast_shapes(x.shape(), shape, "sum_to") == x.shape(), "sum_to", "expected a shape that ",
           shape_str(x.shape()), " broadcasts from, got ", shape_str(shape));
  const size_t lead = x.shape().size() - shape.size();
  std::vector<int64_t> dims;
  for (size_t d = 0; d < x.shape().size(); ++d)
    if (d < lead || (shape[d - lead] == 1 && x.shape()[d] != 1)) dims.push_back(int64_t(d));
  Tensor s = dims.empty() ? x : sum(x, dims, /*keepdim=*/true);
  return reshape(s, shape);
}

}  // namespace tessera

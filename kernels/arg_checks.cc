// Argument checks shared by the CPU and CUDA kernels (see arg_checks.h).
#include "kernels/arg_checks.h"

#include "core/error.h"

namespace tessera::kernels {

bool is_comparison_or_logic(BinaryOp op) {
  switch (op) {
    case BinaryOp::eq:
    case BinaryOp::ne:
    case BinaryOp::lt:
    case BinaryOp::le:
    case BinaryOp::gt:
    case BinaryOp::ge:
    case BinaryOp::logical_and:
    case BinaryOp::logical_or:
      return true;
    default:
      return false;
  }
}

bool is_numeric_op(BinaryOp op) {
  return op == BinaryOp::add || op == BinaryOp::sub || op == BinaryOp::mul ||
         op == BinaryOp::maximum || op == BinaryOp::minimum;
}

void check_reduce_args(ReduceOp op, const char* name, const Tensor& x,
                       const std::vector<int64_t>& dims, const Tensor& out, double param) {
  TS_CHECK(!dims.empty(), name, "expected at least one dim to reduce, got none for ", x.describe());
  for (size_t i = 0; i < dims.size(); ++i) {
    TS_CHECK(dims[i] >= 0 && dims[i] < x.dim() && (i == 0 || dims[i] > dims[i - 1]), name,
             "expected sorted unique dims in [0, ", x.dim(), "), got dim ", dims[i], " for ",
             x.describe());
  }
  Shape want = x.shape();
  for (int64_t d : dims) want[size_t(d)] = 1;
  TS_CHECK(out.shape() == want, name, "expected an output of shape ", shape_str(want),
           " (keepdim), got ", out.describe());
  const bool is_arg = op == ReduceOp::argmax || op == ReduceOp::argmin;
  if (is_arg) {
    TS_CHECK(dims.size() == 1, name, "expected exactly one dim, got ", dims.size(), " for ",
             x.describe());
    TS_CHECK(out.dtype() == DType::i64, name, "expected an i64 output, got ", out.describe());
  } else if (op == ReduceOp::sum && !is_floating(x.dtype())) {
    TS_CHECK(out.dtype() == DType::i64 || (out.dtype() == x.dtype() && x.dtype() != DType::b8),
             name, "expected an i64 output (or ", dtype_name(x.dtype()),
             ") for an integer sum, got ", out.describe());
  } else {
    TS_CHECK(out.dtype() == x.dtype(), name, "expected an output of dtype ", dtype_name(x.dtype()),
             ", got ", out.describe());
  }
  if (x.dtype() == DType::b8) {
    TS_CHECK(op == ReduceOp::sum, name,
             "expected a numeric dtype (f32, f16, bf16, i32, i64), got b8");
  }
  if (op == ReduceOp::norm) {
    TS_CHECK(param > 0.0, name, "expected p > 0 (inf allowed), got p = ", param);
  }
}

void check_index_args(const char* op, const Tensor& dense, const Tensor& index,
                      const Tensor& indexed, int64_t dim, bool dense_equal) {
  TS_CHECK(index.dtype() == DType::i64, op, "expected index i64, got ", index.describe());
  TS_CHECK(dense.dtype() == indexed.dtype(), op, "expected equal dtypes, got ", dense.describe(),
           " and ", indexed.describe());
  TS_CHECK(index.dim() == indexed.dim() && index.dim() == dense.dim(), op,
           "expected index, src/out and x of equal rank, got index ", index.describe(), ", ",
           dense.describe(), " and ", indexed.describe());
  for (int64_t d = 0; d < index.dim(); ++d) {
    bool ok = dense_equal ? index.size(d) == dense.size(d) : index.size(d) <= dense.size(d);
    if (d != dim) ok = ok && index.size(d) <= indexed.size(d);
    TS_CHECK(ok, op, "expected index shape compatible along dim ", d, ", got index ",
             shape_str(index.shape()), " with ", shape_str(dense.shape()), " and ",
             shape_str(indexed.shape()), " (dim ", dim, ")");
  }
}

}  // namespace tessera::kernels

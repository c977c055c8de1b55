// CUDA reductions (sum, mean, max, min, argmax, argmin, var, p-norms over any dims): validation
// and geometry on the host, kernels in reduce_kernels.cuh. Floating inputs accumulate in f32,
// integers in i64; var takes two passes (mean, then squared deviations) like the CPU.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/factory.h"
#include "kernels/arg_checks.h"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/reduce_kernels.cuh"

namespace tessera::kernels::cuda {
namespace {

using namespace reduce_detail;

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::mean:
      return "mean";
    case ReduceOp::max:
      return "max";
    case ReduceOp::min:
      return "min";
    case ReduceOp::argmax:
      return "argmax";
    case ReduceOp::argmin:
      return "argmin";
    case ReduceOp::var:
      return "var";
    case ReduceOp::norm:
      return "norm";
  }
  return "reduce";
}

// The host view of one reduction: outputs (out's shape) by reduced elements (the reduced dims).
struct Geometry {
  Collapsed<2> outer;  // {out, x} over out's shape
  Collapsed<1> inner;  // {x} over the reduced dims
  int64_t m = 0, r = 0;
};

Geometry make_geometry(const Tensor& x, const std::vector<int64_t>& dims, const Shape& out_shape,
                       const Strides& out_strides) {
  Geometry g;
  Shape red_shape;
  Strides red_strides;
  for (int64_t d : dims) {
    red_shape.push_back(x.size(d));
    red_strides.push_back(x.stride(d));
  }
  g.outer = collapse<2>(out_shape, {out_strides, x.strides()});
  g.inner = collapse<1>(red_shape, {red_strides});
  g.m = shape_numel(out_shape);
  g.r = shape_numel(red_shape);
  return g;
}

// Runs one fold over the geometry, writing Out values through out_ptr at outer's out offsets.
template <typename T, typename Out, typename R>
void run(const Geometry& g, const Tensor& x, Out* out_ptr, R red, Transform transform,
         Finish finish, const char* name) {
  Params<T, Out, R> p{};
  p.x = static_cast<const T*>(x.data_ptr());
  p.out = out_ptr;
  p.outer = make_calc<2, int64_t>(g.outer, name);
  p.inner = make_calc<1, int64_t>(g.inner, name);
  p.m_count = g.m;
  p.r_count = g.r;
  p.red = red;
  p.transform = transform;
  p.finish = finish;

  // Lanes should walk the operand with the smaller stride: the reduced run (rows) or adjacent
  // outputs (columns). Short reductions take columns so that no warp idles on a few elements.
  const int64_t so = g.outer.sizes.empty() ? INT64_MAX : std::abs(g.outer.strides.back()[1]);
  const int64_t si = g.inner.sizes.empty() ? INT64_MAX : std::abs(g.inner.strides.back()[0]);
  const bool columns = g.m > 1 && (g.r < 32 || so < si);
  const bool block_rows = !columns && g.r >= 2048;
  const int64_t target_blocks = 4 * int64_t(sm_count(x.device().index));
  int64_t blocks, min_split;
  if (columns) {
    blocks = ceil_div(g.m, 32);
    min_split = 256;
  } else if (block_rows) {
    blocks = g.m;
    min_split = 4096;
  } else {
    blocks = ceil_div(g.m, kThreads / 32);
    min_split = INT64_MAX;  // warp rows are short: never split
  }
  int64_t splits = 1;
  if (blocks < target_blocks && min_split != INT64_MAX) {
    splits =
        std::clamp<int64_t>(std::min(ceil_div(target_blocks, blocks), g.r / min_split), 1, 65535);
  }
  p.splits = int(splits);
  Tensor partial;
  if (splits > 1) {
    const int64_t bytes = g.m * splits * int64_t(sizeof(typename R::State));
    partial = empty({ceil_div(bytes, 8)}, {.dtype = DType::i64, .device = x.device()});
    p.partial = static_cast<typename R::State*>(partial.data_ptr());
  }
  cudaStream_t stream = stream_of(x);
  const dim3 grid(unsigned(std::min<int64_t>(blocks, 1 << 20)), unsigned(splits));
  if (columns) {
    reduce_cols_kernel<T, Out, R><<<grid, dim3(32, kSlices), 0, stream>>>(p);
  } else if (block_rows) {
    reduce_rows_kernel<T, Out, R, true><<<grid, kThreads, 0, stream>>>(p);
  } else {
    reduce_rows_kernel<T, Out, R, false><<<grid, kThreads, 0, stream>>>(p);
  }
  TS_CUDA_LAUNCH_CHECK();
  if (splits > 1) {
    reduce_merge_kernel<T, Out, R><<<grid_for(g.m), kThreads, 0, stream>>>(p);
    TS_CUDA_LAUNCH_CHECK();
  }
}

// sum, mean, max, min, var, norm on a floating x; g.r >= 1.
template <typename T>
void float_reduce(ReduceOp op, const Geometry& g, const Tensor& x, const std::vector<int64_t>& dims,
                  const Tensor& out, double param, const char* name) {
  T* po = static_cast<T*>(out.data_ptr());
  const Sum<float> sum;
  const float n = float(g.r);
  switch (op) {
    case ReduceOp::sum:
      return run<T>(g, x, po, sum, {}, {}, name);
    case ReduceOp::mean:
      return run<T>(g, x, po, sum, {}, {FinishKind::div, n}, name);
    case ReduceOp::max:
      return run<T>(g, x, po, Extreme<float>{true}, {}, {}, name);
    case ReduceOp::min:
      return run<T>(g, x, po, Extreme<float>{false}, {}, {}, name);
    case ReduceOp::var: {
      // Pass 1: each output's mean into a contiguous f32 tensor of out's shape (flat order = m).
      Tensor mean = empty(out.shape(), {.dtype = DType::f32, .device = x.device()});
      const Geometry gm = make_geometry(x, dims, out.shape(), mean.strides());
      run<T>(gm, x, static_cast<float*>(mean.data_ptr()), sum, {}, {FinishKind::div, n}, name);
      // Pass 2: squared deviations; PyTorch's max(0, N - correction) as the divisor.
      const float denom = float(std::max(0.0, double(g.r) - param));
      const Transform dev{TransformKind::sq_dev, 1.0f, static_cast<const float*>(mean.data_ptr())};
      return run<T>(g, x, po, sum, dev, {FinishKind::div, denom}, name);
    }
    case ReduceOp::norm:
      if (std::isinf(param))
        return run<T>(g, x, po, Extreme<float>{true}, {TransformKind::abs}, {}, name);
      if (param == 1.0) return run<T>(g, x, po, sum, {TransformKind::abs}, {}, name);
      if (param == 2.0)
        return run<T>(g, x, po, sum, {TransformKind::square}, {FinishKind::sqrt}, name);
      return run<T>(g, x, po, sum, {TransformKind::pow_abs, float(param)},
                    {FinishKind::pow, float(1.0 / param)}, name);
    default:
      break;
  }
  TS_ASSERT(false);
}

// A reduction over zero elements: PyTorch's values (sum 0, mean/var NaN, norm 0); max-like ops
// throw.
void reduce_empty(ReduceOp op, const char* name, const Tensor& x, const Tensor& out) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::norm:
      out.fill_(0.0);
      return;
    case ReduceOp::mean:
    case ReduceOp::var:
      out.fill_(std::numeric_limits<double>::quiet_NaN());
      return;
    default:
      TS_FAIL(name, "expected a non-empty reduction (it has no identity), got ", x.describe());
  }
}

void check_reduce(ReduceOp op, const char* name, const Tensor& x, const std::vector<int64_t>& dims,
                  const Tensor& out, double param) {
  check_cuda_tensors(name, {&x, &out});
  check_reduce_args(op, name, x, dims, out, param);
}

}  // namespace

void reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, const Tensor& out,
            double param) {
  const char* name = reduce_op_name(op);
  check_reduce(op, name, x, dims, out, param);
  const Geometry g = make_geometry(x, dims, out.shape(), out.strides());
  if (g.m == 0) return;
  if (g.r == 0) return reduce_empty(op, name, x, out);
  TensorDeviceGuard guard(x);
  const bool is_arg = op == ReduceOp::argmax || op == ReduceOp::argmin;
  const bool is_max = op == ReduceOp::argmax || op == ReduceOp::max;
  dispatch_dtype(x.dtype(), [&]<typename T>() {
    if constexpr (kIsFloat<T>) {
      if (is_arg)
        return run<T>(g, x, static_cast<int64_t*>(out.data_ptr()), Arg<float>{is_max}, {}, {},
                      name);
      return float_reduce<T>(op, g, x, dims, out, param, name);
    } else {
      // Integers and bools: sum (into i64 or the input's integer dtype), max, min, argmax, argmin.
      if constexpr (kIsInt<T>) {
        if (is_arg)
          return run<T>(g, x, static_cast<int64_t*>(out.data_ptr()), Arg<int64_t>{is_max}, {}, {},
                        name);
        if (op == ReduceOp::max || op == ReduceOp::min) {
          return run<T>(g, x, static_cast<T*>(out.data_ptr()), Extreme<int64_t>{is_max}, {}, {},
                        name);
        }
      }
      if (op == ReduceOp::sum) {
        if (out.dtype() == DType::i64)
          return run<T>(g, x, static_cast<int64_t*>(out.data_ptr()), Sum<int64_t>{}, {}, {}, name);
        if constexpr (std::is_same_v<T, int32_t>) {
          return run<T>(g, x, static_cast<int32_t*>(out.data_ptr()), Sum<int64_t>{}, {}, {}, name);
        }
      }
      TS_FAIL(name, "expected a floating dtype (f32, f16, bf16), got ", dtype_name(x.dtype()),
              " (the op layer promotes integers to f32 first)");
    }
  });
}

}  // namespace tessera::kernels::cuda

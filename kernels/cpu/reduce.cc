// CPU reductions: validation, per-op folds on top of reduce_engine.h, and the final per-output
// step (mean's division, var's second pass, the norm's root) written into `out`.
#include "kernels/cpu/reduce.h"

#include <math.h>

#include <cmath>
#include <limits>

#include "kernels/arg_checks.h"
#include "kernels/cpu/loops.h"
#include "kernels/cpu/reduce_arg.h"
#include "kernels/cpu/reduce_engine.h"
#include "kernels/math.h"

namespace tessera::kernels::cpu {
namespace {

using detail::MaxOp;
using detail::MinOp;
using detail::ReduceGeometry;
using detail::SumOp;

// Writes value(m) (outer flat order) into out's elements.
template <typename Out, typename F>
void store(const ReduceGeometry& geo, const Tensor& out, F value) {
  Out* po = static_cast<Out*>(out.data_ptr());
  const int64_t os = geo.outer.row_strides()[0];
  parallel_for(geo.m, kGrain, [&](int64_t mb, int64_t me) {
    for_segments(geo.outer, mb, me, [&](const std::array<int64_t, 2>& off, int64_t n, int64_t m0) {
      for (int64_t j = 0; j < n; ++j) po[off[0] + j * os] = Out(value(m0 + j));
    });
  });
}

struct Identity {
  template <typename Acc>
  Acc operator()(Acc v, int64_t) const {
    return v;
  }
};

// Sum of integers or bools, in i64, written as out's integer dtype.
template <typename T>
void int_sum(const ReduceGeometry& geo, const Tensor& x, const Tensor& out) {
  std::vector<int64_t> res(size_t(geo.m));
  detail::reduce_fold<SumOp<int64_t>, int64_t>(geo, static_cast<const T*>(x.data_ptr()), Identity{},
                                               res.data());
  if (out.dtype() == DType::i64)
    return store<int64_t>(geo, out, [&](int64_t m) { return res[size_t(m)]; });
  store<int32_t>(geo, out, [&](int64_t m) { return int32_t(res[size_t(m)]); });
}

// sum, mean, max, min, var, norm on a floating or (sum, max, min) integer x; geo.r >= 1.
template <typename T>
void fold_reduce(ReduceOp op, const ReduceGeometry& geo, const Tensor& x, const Tensor& out,
                 double param) {
  using Acc = std::conditional_t<is_float_v<T>, float, int64_t>;
  const T* px = static_cast<const T*>(x.data_ptr());
  std::vector<Acc> res(size_t(geo.m));
  Acc* r = res.data();
  auto write = [&](auto value) { store<T>(geo, out, value); };
  switch (op) {
    case ReduceOp::sum:
      detail::reduce_fold<SumOp<Acc>, Acc>(geo, px, Identity{}, r);
      return write([&](int64_t m) { return r[m]; });
    case ReduceOp::max:
      detail::reduce_fold<MaxOp<Acc>, Acc>(geo, px, Identity{}, r);
      return write([&](int64_t m) { return r[m]; });
    case ReduceOp::min:
      detail::reduce_fold<MinOp<Acc>, Acc>(geo, px, Identity{}, r);
      return write([&](int64_t m) { return r[m]; });
    default:
      break;
  }
  if constexpr (is_float_v<T>) {
    const float n = float(geo.r);
    switch (op) {
      case ReduceOp::mean:
        detail::reduce_fold<SumOp<float>, float>(geo, px, Identity{}, r);
        return write([&](int64_t m) { return r[m] / n; });
      case ReduceOp::var: {
        // Two passes (mean, then squared deviations) for accuracy; PyTorch's max(0, N -
        // correction).
        detail::reduce_fold<SumOp<float>, float>(geo, px, Identity{}, r);
        std::vector<float> mean(res.size());
        for (size_t m = 0; m < mean.size(); ++m) mean[m] = r[m] / n;
        const float* mu = mean.data();
        detail::reduce_fold<SumOp<float>, float>(
            geo, px, [mu](float v, int64_t m) { return (v - mu[m]) * (v - mu[m]); }, r);
        const float denom = float(std::max(0.0, double(geo.r) - param));
        return write([&](int64_t m) { return r[m] / denom; });
      }
      case ReduceOp::norm: {
        if (std::isinf(param)) {
          detail::reduce_fold<MaxOp<float>, float>(
              geo, px, [](float v, int64_t) { return math::abs(v); }, r);
          return write([&](int64_t m) { return r[m]; });
        }
        if (param == 1.0) {
          detail::reduce_fold<SumOp<float>, float>(
              geo, px, [](float v, int64_t) { return math::abs(v); }, r);
          return write([&](int64_t m) { return r[m]; });
        }
        if (param == 2.0) {
          detail::reduce_fold<SumOp<float>, float>(
              geo, px, [](float v, int64_t) { return v * v; }, r);
          return write([&](int64_t m) { return std::sqrt(r[m]); });
        }
        const float p = float(param), inv_p = float(1.0 / param);
        detail::reduce_fold<SumOp<float>, float>(
            geo, px, [p](float v, int64_t) { return ::powf(math::abs(v), p); }, r);
        return write([&](int64_t m) { return ::powf(r[m], inv_p); });
      }
      default:
        break;
    }
  }
  TS_FAIL(reduce_op_name(op), "expected a floating dtype (f32, f16, bf16), got ",
          dtype_name(x.dtype()), " (the op layer promotes integers to f32 first)");
}

// A reduction over zero elements: PyTorch's values (sum 0, mean/var NaN, norm 0); max-like ops
// throw.
void reduce_empty(ReduceOp op, const char* name, const Tensor& x, const Tensor& out, double param) {
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
  TS_CHECK(x.device().is_cpu() && out.device().is_cpu(), name, "expected cpu tensors, got ",
           x.describe(), " and ", out.describe());
  check_reduce_args(op, name, x, dims, out, param);
}

}  // namespace

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

void reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, const Tensor& out,
            double param) {
  const char* name = reduce_op_name(op);
  check_reduce(op, name, x, dims, out, param);
  Shape red_shape;
  Strides red_strides;
  for (int64_t d : dims) {
    red_shape.push_back(x.size(d));
    red_strides.push_back(x.stride(d));
  }
  const ReduceGeometry geo(out.shape(), out.strides(), x.strides(), red_shape, red_strides);
  if (geo.m == 0) return;
  if (geo.r == 0) return reduce_empty(op, name, x, out, param);
  dispatch_dtype(x.dtype(), [&]<typename T>() {
    if constexpr (is_float_v<T> || is_int_v<T>) {
      if (op == ReduceOp::argmax || op == ReduceOp::argmin) {
        std::vector<int64_t> res(size_t(geo.m));
        detail::arg_reduce<T>(op == ReduceOp::argmax, geo, static_cast<const T*>(x.data_ptr()),
                              res.data());
        return store<int64_t>(geo, out, [&](int64_t m) { return res[size_t(m)]; });
      }
    }
    if constexpr (!is_float_v<T>) {
      if (op == ReduceOp::sum) return int_sum<T>(geo, x, out);
    }
    if constexpr (is_float_v<T> || is_int_v<T>) {
      return fold_reduce<T>(op, geo, x, out, param);
    } else {
      TS_FAIL(name, "expected a numeric dtype (f32, f16, bf16, i32, i64), got ",
              dtype_name(x.dtype()));
    }
  });
}

}  // namespace tessera::kernels::cpu

// CPU gather / scatter_add along `dim`. Both walk index's shape as (other dims) x (dim): threads
// split the other dims, and each thread runs the `dim` axis in order, so scatter_add's collisions
// (equal index values along dim) land in one thread, in a fixed order: no races, deterministic.
#include "kernels/cpu/index.h"

#include <algorithm>
#include <array>
#include <type_traits>

#include "core/parallel.h"
#include "core/strided_loop.h"
#include "kernels/arg_checks.h"

namespace tessera::kernels::cpu {
namespace {

// Geometry of one indexed walk: the outer loop over index's shape without `dim`, and the strides
// of the three operands (0: the dense side shaped like index, 1: index, 2: the indexed side).
struct IndexWalk {
  Shape outer;
  std::array<Strides, 3> outer_strides;
  int64_t inner = 0;                    // index.size(dim)
  std::array<int64_t, 3> inner_stride;  // along dim
};

IndexWalk make_walk(const Tensor& dense, const Tensor& index, const Tensor& indexed, int64_t dim) {
  IndexWalk w;
  const Tensor* ops[3] = {&dense, &index, &indexed};
  for (int64_t d = 0; d < index.dim(); ++d) {
    if (d == dim) continue;
    w.outer.push_back(index.size(d));
    for (int k = 0; k < 3; ++k) w.outer_strides[k].push_back(ops[k]->stride(d));
  }
  w.inner = index.dim() == 0 ? 1 : index.size(dim);
  for (int k = 0; k < 3; ++k) w.inner_stride[k] = ops[k]->dim() == 0 ? 0 : ops[k]->stride(dim);
  return w;
}

// Checks shapes (torch rules) and every index value against the size of `indexed` along dim.
// `dense` is out for gather (shape == index's) and src for scatter_add (index.size(d) <= src's).
void check_args(const char* op, const Tensor& dense, const Tensor& index, const Tensor& indexed,
                int64_t dim, bool dense_equal) {
  check_index_args(op, dense, index, indexed, dim, dense_equal);
  if (index.numel() == 0) return;
  const int64_t bound = index.dim() == 0 ? 1 : indexed.size(dim);
  StridedLoop<1> loop(index.shape(), {index.strides()});
  const int64_t* p = static_cast<const int64_t*>(index.data_ptr());
  const int64_t n = loop.row_size(), st = loop.row_strides()[0];
  loop.for_rows(0, loop.num_rows(), [&](const std::array<int64_t, 1>& off) {
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = p[off[0] + i * st];
      TS_CHECK(v >= 0 && v < bound, op, "expected index values in [0, ", bound, ") along dim ", dim,
               ", got ", v);
    }
  });
}

// Runs fn(dense_elem_offset, index_value, indexed_elem_offset) over the walk; threads split the
// outer dims only.
template <typename Fn>
void run_walk(const IndexWalk& w, const int64_t* index_base, Fn&& fn) {
  StridedLoop<3> loop(w.outer, w.outer_strides);
  const int64_t row = loop.row_size();
  const auto rs = loop.row_strides();
  const auto is = w.inner_stride;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, row * w.inner));
  parallel_for(loop.num_rows(), grain, [&](int64_t begin, int64_t end) {
    loop.for_rows(begin, end, [&](const std::array<int64_t, 3>& off) {
      for (int64_t i = 0; i < row; ++i) {
        const int64_t o0 = off[0] + i * rs[0], o1 = off[1] + i * rs[1], o2 = off[2] + i * rs[2];
        for (int64_t j = 0; j < w.inner; ++j) {
          fn(o0 + j * is[0], index_base[o1 + j * is[1]], o2);
        }
      }
    });
  });
}

}  // namespace

void gather(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out) {
  const char* op = "gather";
  const int64_t d = x.dim() == 0 ? 0 : wrap_dim(dim, x.dim(), op);
  check_args(op, out, index, x, d, /*dense_equal=*/true);
  if (index.numel() == 0) return;
  const IndexWalk w = make_walk(out, index, x, d);
  const int64_t x_step = w.inner_stride[2];
  const int64_t* ip = static_cast<const int64_t*>(index.data_ptr());
  dispatch_dtype(x.dtype(), [&]<typename T>() {
    const T* xp = static_cast<const T*>(x.data_ptr());
    T* out_p = static_cast<T*>(out.data_ptr());
    run_walk(w, ip, [&](int64_t o, int64_t v, int64_t xo) { out_p[o] = xp[xo + v * x_step]; });
  });
}

void scatter_add(const Tensor& src, int64_t dim, const Tensor& index, const Tensor& out) {
  const char* op = "scatter_add";
  const int64_t d = out.dim() == 0 ? 0 : wrap_dim(dim, out.dim(), op);
  TS_CHECK(out.dtype() != DType::b8, op, "expected a numeric dtype, got ", out.describe());
  check_args(op, src, index, out, d, /*dense_equal=*/false);
  if (index.numel() == 0) return;
  const IndexWalk w = make_walk(src, index, out, d);
  const int64_t out_step = w.inner_stride[2];
  const int64_t* ip = static_cast<const int64_t*>(index.data_ptr());
  dispatch_dtype(out.dtype(), [&]<typename T>() {
    if constexpr (!std::is_same_v<T, bool>) {
      const T* sp = static_cast<const T*>(src.data_ptr());
      T* out_p = static_cast<T*>(out.data_ptr());
      run_walk(w, ip, [&](int64_t s, int64_t v, int64_t oo) {
        T& dst = out_p[oo + v * out_step];
        if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
          dst = T(float(dst) + float(sp[s]));
        } else {
          dst += sp[s];
        }
      });
    }
  });
}

}  // namespace tessera::kernels::cpu

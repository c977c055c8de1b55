// CPU softmax, log-softmax and their backwards over the last dim: rows split across threads, each
// row in f32 (16-bit rows converted on the way in and out), max-subtracted for stability, with
// AVX-512 or AVX2 row loops chosen at run time.
#include "kernels/cpu/softmax.h"

#include <cmath>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/row_math.h"

namespace tessera::kernels::cpu {
namespace {

using detail::row_as_f32;

void check_pair(const char* op, const Tensor& a, const Tensor& b) {
  TS_CHECK(a.shape() == b.shape() && a.dtype() == b.dtype(), op,
           "expected tensors of equal shape and dtype, got ", a.describe(), " and ", b.describe());
}

// Runs row_fn(isa, in_rows, out_row_f32, cols) for every row of contiguous (R, C) inputs and writes
// each f32 result row into `out` (any layout), converting to out's dtype. in_rows are f32 views of
// the inputs' rows. out_row may be the output row itself (f32 outputs), so row_fn must not read
// it before writing it. Each thread's rows run under with_isa (AVX-512 or AVX2 loops), isa being
// the tag for row_math's explicit-vector helpers.
template <typename T, size_t N, typename RowFn>
void map_rows(const std::array<Tensor, N>& inputs, const Tensor& out, RowFn&& row_fn) {
  const int64_t rows = detail::leading_rows(out), cols = detail::last_dim(out);
  if (rows == 0 || cols == 0) return;
  std::array<Tensor, N> in;
  for (size_t k = 0; k < N; ++k) in[k] = inputs[k].contiguous();
  Tensor dst = detail::contiguous_output(out);
  std::array<const T*, N> in_ptr;
  for (size_t k = 0; k < N; ++k) in_ptr[k] = static_cast<const T*>(in[k].data_ptr());
  T* out_ptr = static_cast<T*>(dst.data_ptr());
  parallel_for(rows, detail::row_grain(cols), [&](int64_t begin, int64_t end) {
    std::array<std::vector<float>, N> scratch;
    std::vector<float> out_scratch(detail::kIsF32<T> ? 0 : size_t(cols));
    with_isa([&](auto isa) {
      for (int64_t r = begin; r < end; ++r) {
        std::array<const float*, N> row;
        for (size_t k = 0; k < N; ++k) {
          row[k] = row_as_f32(in_ptr[k] + r * cols, 1, cols, scratch[k]);
        }
        float* o;
        if constexpr (detail::kIsF32<T>) {
          o = out_ptr + r * cols;
        } else {
          o = out_scratch.data();
        }
        row_fn(isa, row, o, cols);
        if constexpr (!detail::kIsF32<T>) detail::store_row(o, out_ptr + r * cols, 1, cols);
      }
    });
  });
  detail::finish_output(dst, out);
}

}  // namespace

void softmax(const Tensor& x, const Tensor& out) {
  check_pair("softmax", x, out);
  dispatch_floating(x.dtype(), "softmax", [&]<typename T>() {
    map_rows<T, 1>({x}, out,
                   [](auto isa, const std::array<const float*, 1>& in, float* o, int64_t n) {
                     float m = detail::row_max(isa, in[0], n);
                     float inv = 1.0f / detail::row_exp_store(isa, in[0], m, o, n);
#pragma omp simd
                     for (int64_t i = 0; i < n; ++i) o[i] *= inv;
                   });
  });
}

void log_softmax(const Tensor& x, const Tensor& out) {
  check_pair("log_softmax", x, out);
  dispatch_floating(x.dtype(), "log_softmax", [&]<typename T>() {
    map_rows<T, 1>({x}, out,
                   [](auto isa, const std::array<const float*, 1>& in, float* o, int64_t n) {
                     float m = detail::row_max(isa, in[0], n);
                     // (x - m) - log(s), not x - (m + log(s)): the latter loses digits when |m| is
                     // large.
                     float log_s = std::log(detail::row_exp_sum(isa, in[0], m, n));
#pragma omp simd
                     for (int64_t i = 0; i < n; ++i) o[i] = (in[0][i] - m) - log_s;
                   });
  });
}

void softmax_backward(const Tensor& y, const Tensor& grad_y, const Tensor& grad_x) {
  check_pair("softmax_backward", y, grad_y);
  check_pair("softmax_backward", y, grad_x);
  dispatch_floating(y.dtype(), "softmax_backward", [&]<typename T>() {
    map_rows<T, 2>({y, grad_y}, grad_x,
                   [](auto isa, const std::array<const float*, 2>& in, float* o, int64_t n) {
                     const float *yr = in[0], *gr = in[1];
                     detail::row_mul_sub(isa, yr, gr, detail::row_dot(isa, yr, gr, n), o, n);
                   });
  });
}

void log_softmax_backward(const Tensor& y, const Tensor& grad_y, const Tensor& grad_x) {
  check_pair("log_softmax_backward", y, grad_y);
  check_pair("log_softmax_backward", y, grad_x);
  dispatch_floating(y.dtype(), "log_softmax_backward", [&]<typename T>() {
    map_rows<T, 2>({y, grad_y}, grad_x,
                   [](auto isa, const std::array<const float*, 2>& in, float* o, int64_t n) {
                     const float *yr = in[0], *gr = in[1];
                     float total = detail::row_sum(isa, gr, n);
                     detail::row_sub_exp_scale(isa, gr, yr, total, o, n);
                   });
  });
}

}  // namespace tessera::kernels::cpu

// CPU embedding: the forward copies one weight row per id (threads over ids); the backward sorts
// positions by id and gives each thread whole ids, so every row of grad_weight is summed by one
// thread in position order: deterministic, and no atomics.
#include "kernels/cpu/embedding.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/row_math.h"

namespace tessera::kernels::cpu {
namespace {

// ids (any shape, i32 or i64, any strides) as a flat row-major i64 list, each checked in [0, V).
std::vector<int64_t> flat_ids(const Tensor& ids, int64_t V, const char* op) {
  TS_CHECK(ids.dtype() == DType::i64 || ids.dtype() == DType::i32, op,
           "expected ids i32 or i64, got ", ids.describe());
  Tensor c = ids.to(DType::i64).contiguous();
  const int64_t* p = c.data<int64_t>();
  std::vector<int64_t> out(p, p + c.numel());
  for (int64_t v : out) {
    TS_CHECK(v >= 0 && v < V, op, "expected ids in [0, ", V, "), got ", v);
  }
  return out;
}

// The kernels address rows as base + id * stride(0) and need unit-stride rows; any other layout is
// copied first (or, for grad_weight, accumulated in a contiguous scratch copied back).
void check_table(const Tensor& t, const char* op, const char* name) {
  TS_CHECK(t.dim() == 2, op, "expected ", name, " of shape (V, C), got ", t.describe());
}

}  // namespace

void embedding(const Tensor& weight, const Tensor& ids, const Tensor& out) {
  const char* op = "embedding";
  check_table(weight, op, "weight");
  const int64_t V = weight.size(0), C = weight.size(1);
  Shape want = ids.shape();
  want.push_back(C);
  TS_CHECK(out.shape() == want && out.dtype() == weight.dtype(), op, "expected out ",
           shape_str(want), " ", dtype_name(weight.dtype()), ", got ", out.describe());
  const std::vector<int64_t> idx = flat_ids(ids, V, op);
  const int64_t n = int64_t(idx.size());
  if (n == 0 || C == 0) return;
  Tensor w = weight.stride(1) == 1 ? weight : weight.contiguous();
  Tensor oc = detail::contiguous_output(out);
  const char* w_base = static_cast<const char*>(w.data_ptr());
  char* o_base = static_cast<char*>(oc.data_ptr());
  const int64_t item = int64_t(w.itemsize()), row_bytes = C * item, w_stride = w.stride(0) * item;
  parallel_for(n, std::max<int64_t>(1, 65536 / row_bytes), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      std::memcpy(o_base + i * row_bytes, w_base + idx[i] * w_stride, size_t(row_bytes));
    }
  });
  detail::finish_output(oc, out);
}

void embedding_backward(const Tensor& grad_out, const Tensor& ids, const Tensor& grad_weight) {
  const char* op = "embedding_backward";
  check_table(grad_weight, op, "grad_weight");
  const int64_t V = grad_weight.size(0), C = grad_weight.size(1);
  Shape want = ids.shape();
  want.push_back(C);
  TS_CHECK(grad_out.shape() == want && is_floating(grad_out.dtype()), op, "expected grad_out ",
           shape_str(want), " floating, got ", grad_out.describe());
  const std::vector<int64_t> idx = flat_ids(ids, V, op);
  const int64_t n = int64_t(idx.size());
  if (n == 0 || C == 0) return;

  // Positions sorted by id (stable: equal ids keep position order), then runs of one id.
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return idx[a] < idx[b]; });
  std::vector<int64_t> run_start{0};
  for (int64_t k = 1; k < n; ++k) {
    if (idx[order[k]] != idx[order[k - 1]]) run_start.push_back(k);
  }
  run_start.push_back(n);
  const int64_t runs = int64_t(run_start.size()) - 1;

  Tensor g = grad_out.contiguous();
  Tensor gw =
      grad_weight.stride(1) == 1 ? grad_weight : detail::contiguous_output(grad_weight, true);
  dispatch_floating(g.dtype(), op, [&]<typename G>() {
    dispatch_floating(gw.dtype(), op, [&]<typename W>() {
      const G* g_p = static_cast<const G*>(g.data_ptr());
      W* w_p = static_cast<W*>(gw.data_ptr());
      const int64_t w_stride = gw.stride(0);
      parallel_for(runs, std::max<int64_t>(1, 16384 / C), [&](int64_t begin, int64_t end) {
        std::vector<float> acc(static_cast<size_t>(C)), row;
        for (int64_t r = begin; r < end; ++r) {
          W* dst = w_p + idx[order[run_start[r]]] * w_stride;
          detail::load_row(dst, 1, acc.data(), C);
          for (int64_t k = run_start[r]; k < run_start[r + 1]; ++k) {
            const float* src = detail::row_as_f32(g_p + order[k] * C, 1, C, row);
            float* a = acc.data();
#pragma omp simd
            for (int64_t c = 0; c < C; ++c) a[c] += src[c];
          }
          detail::store_row(acc.data(), dst, 1, C);
        }
      });
    });
  });
  detail::finish_output(gw, grad_weight);
}

}  // namespace tessera::kernels::cpu

// CPU cross-entropy over (N, V) logits, rows split across threads. The forward reads each row twice
// (max, then sum of exp) and stores nothing per element; the backward writes softmax minus the
// smoothed one-hot straight into grad_logits.
#include "kernels/cpu/cross_entropy.h"

#include <cmath>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/row_math.h"

namespace tessera::kernels::cpu {
namespace {

// A 1-D tensor of any dtype and strides as host values of type V.
template <typename V>
std::vector<V> values_1d(const Tensor& t, DType as) {
  Tensor c = t.to(as).contiguous();
  const V* p = c.data<V>();
  return std::vector<V>(p, p + c.numel());
}

void check_common(const char* op, const Tensor& logits, const Tensor& targets, double smoothing) {
  TS_CHECK(logits.dim() == 2, op, "expected logits of shape (N, V), got ", logits.describe());
  TS_CHECK(targets.dtype() == DType::i64 && targets.dim() == 1 && targets.size(0) == logits.size(0),
           op, "expected targets i64 of shape (", logits.size(0), "), got ", targets.describe());
  TS_CHECK(smoothing >= 0.0 && smoothing <= 1.0, op, "expected label_smoothing in [0, 1], got ",
           smoothing);
}

void check_rows_f32(const char* op, const char* name, const Tensor& t, int64_t N) {
  TS_CHECK(t.dim() == 1 && t.size(0) == N && t.dtype() == DType::f32, op, "expected ", name,
           " f32 of shape (", N, "), got ", t.describe());
}

// Targets as i64, each either ignore_index or in [0, V); checked before any thread starts.
std::vector<int64_t> checked_targets(const char* op, const Tensor& targets, int64_t V,
                                     int64_t ignore_index) {
  std::vector<int64_t> t = values_1d<int64_t>(targets, DType::i64);
  for (size_t i = 0; i < t.size(); ++i) {
    TS_CHECK(t[i] == ignore_index || (t[i] >= 0 && t[i] < V), op, "expected targets in [0, ", V,
             ") or ignore_index ", ignore_index, ", got ", t[i], " at row ", i);
  }
  return t;
}

}  // namespace

void cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                   double label_smoothing, const Tensor& losses, const Tensor& lse) {
  const char* op = "cross_entropy";
  check_common(op, logits, targets, label_smoothing);
  const int64_t N = logits.size(0), V = logits.size(1);
  check_rows_f32(op, "losses", losses, N);
  check_rows_f32(op, "lse", lse, N);
  TS_CHECK(V > 0 || N == 0, op, "expected at least one class, got logits ", logits.describe());
  const std::vector<int64_t> tgt = checked_targets(op, targets, V, ignore_index);
  if (N == 0) return;
  std::vector<float> loss_v(static_cast<size_t>(N)), lse_v(static_cast<size_t>(N));
  const float s = float(label_smoothing);
  const int64_t row_stride = logits.stride(0), col_stride = logits.stride(1);
  dispatch_floating(logits.dtype(), op, [&]<typename T>() {
    const T* base = static_cast<const T*>(logits.data_ptr());
    parallel_for(N, detail::row_grain(V), [&](int64_t begin, int64_t end) {
      std::vector<float> scratch;
      for (int64_t r = begin; r < end; ++r) {
        const float* x = detail::row_as_f32(base + r * row_stride, col_stride, V, scratch);
        const float m = detail::row_max(x, V);
        const float log_s = std::log(detail::row_exp_sum(x, m, V));
        lse_v[r] = m + log_s;
        if (tgt[r] == ignore_index) {
          loss_v[r] = 0.0f;
          continue;
        }
        // Differences to the max first: lse - x_t loses digits when |m| is large.
        float loss = (m - x[tgt[r]]) + log_s;
        // -mean_v log p_v = lse - mean_v x_v
        if (s != 0.0f)
          loss = (1.0f - s) * loss + s * ((m - detail::row_sum(x, V) / float(V)) + log_s);
        loss_v[r] = loss;
      }
    });
  });
  losses.copy_(from_vector(loss_v, {N}));
  lse.copy_(from_vector(lse_v, {N}));
}

void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                            const Tensor& grad_losses, int64_t ignore_index, double label_smoothing,
                            const Tensor& grad_logits) {
  const char* op = "cross_entropy_backward";
  check_common(op, logits, targets, label_smoothing);
  const int64_t N = logits.size(0), V = logits.size(1);
  check_rows_f32(op, "lse", lse, N);
  TS_CHECK(grad_losses.dim() == 1 && grad_losses.size(0) == N && is_floating(grad_losses.dtype()),
           op, "expected grad_losses floating of shape (", N, "), got ", grad_losses.describe());
  TS_CHECK(grad_logits.shape() == logits.shape() && grad_logits.dtype() == logits.dtype(), op,
           "expected grad_logits like logits ", logits.describe(), ", got ",
           grad_logits.describe());
  const std::vector<int64_t> tgt = checked_targets(op, targets, V, ignore_index);
  if (N == 0 || V == 0) return;
  const std::vector<float> lse_v = values_1d<float>(lse, DType::f32);
  const std::vector<float> g_v = values_1d<float>(grad_losses, DType::f32);
  Tensor out = grad_logits.stride(1) == 1 ? grad_logits : detail::contiguous_output(grad_logits);
  const float s = float(label_smoothing), smooth_per_class = s / float(V);
  const int64_t row_stride = logits.stride(0), col_stride = logits.stride(1),
                out_stride = out.stride(0);
  dispatch_floating(logits.dtype(), op, [&]<typename T>() {
    const T* base = static_cast<const T*>(logits.data_ptr());
    T* out_base = static_cast<T*>(out.data_ptr());
    parallel_for(N, detail::row_grain(V), [&](int64_t begin, int64_t end) {
      std::vector<float> scratch, out_scratch(detail::kIsF32<T> ? 0 : size_t(V));
      for (int64_t r = begin; r < end; ++r) {
        float* o;
        if constexpr (detail::kIsF32<T>) {
          o = out_base + r * out_stride;
        } else {
          o = out_scratch.data();
        }
        if (tgt[r] == ignore_index) {
          for (int64_t v = 0; v < V; ++v) o[v] = 0.0f;
        } else {
          // d loss / d x_v = softmax_v - (1 - s) [v == t] - s / V, times the incoming grad.
          const float g = g_v[r];
          const float* x = detail::row_as_f32(base + r * row_stride, col_stride, V, scratch);
          detail::row_exp_scale_add(x, lse_v[r], g, -g * smooth_per_class, o, V);
          o[tgt[r]] -= g * (1.0f - s);
        }
        if constexpr (!detail::kIsF32<T>) detail::store_row(o, out_base + r * out_stride, 1, V);
      }
    });
  });
  detail::finish_output(out, grad_logits);
}

}  // namespace tessera::kernels::cpu

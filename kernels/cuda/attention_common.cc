// Host-side validation and operand views of the CUDA attention (attention_common.h).
#include "kernels/cuda/attention_common.h"

#include <algorithm>
#include <cmath>

namespace tessera::kernels::cuda::attention_detail {

void check_tensor(const char* op, const char* name, const Tensor& t, const Tensor& q,
                  const Shape& shape, DType dtype) {
  TS_CHECK(t.defined(), op, "expected ", name, " to be defined, got an undefined tensor");
  TS_CHECK(t.shape() == shape, op, "expected ", name, " of shape ", shape_str(shape), ", got ",
           t.describe());
  TS_CHECK(t.dtype() == dtype, op, "expected ", name, " of dtype ", dtype_name(dtype), ", got ",
           t.describe());
  TS_CHECK(t.device() == q.device(), op, "expected ", name, " on ", q.device().str(),
           " with q, got ", t.describe());
}

Problem make_problem(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                     const Tensor& key_padding_mask, const AttentionOptions& opts) {
  TS_CHECK(!q.defined() || q.device().is_cuda(), op, "expected CUDA tensors, got q ", q.describe());
  return resolve_problem(op, q, k, v, key_padding_mask, opts);
}

Problem resolve_problem(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& key_padding_mask, const AttentionOptions& opts) {
  TS_CHECK(q.defined() && k.defined() && v.defined() && q.dim() == 4 && k.dim() == 4, op,
           "expected q (B, H, T, D) and k, v (B, H, S, D), got ", q.describe(), ", ", k.describe(),
           ", ", v.describe());
  TS_CHECK(is_floating(q.dtype()), op, "expected q of dtype f32, f16 or bf16, got ", q.describe());
  Problem p;
  p.B = q.size(0), p.H = q.size(1), p.T = q.size(2), p.S = k.size(2);
  const int64_t d = q.size(3);
  TS_CHECK(d == 32 || d == 64 || d == 128, op,
           "expected a head dim of 32, 64 or 128 on CUDA, got q ", q.describe());
  p.D = int(d);
  check_tensor(op, "k", k, q, {p.B, p.H, p.S, d}, q.dtype());
  check_tensor(op, "v", v, q, {p.B, p.H, p.S, d}, q.dtype());
  TS_CHECK(opts.dropout_p >= 0.0f && opts.dropout_p < 1.0f, op,
           "expected dropout_p in [0, 1), got ", opts.dropout_p);
  p.scale = opts.scale != 0.0f ? opts.scale : 1.0f / std::sqrt(float(d));
  p.causal = opts.causal;
  p.shift = p.S - p.T;
  p.dropout_p = opts.dropout_p;
  p.keep_scale = 1.0f / (1.0f - opts.dropout_p);
  p.seed = opts.seed;
  p.dropout = attention_dropout_grid(op, opts, p.H, p.T, p.S);
  if (key_padding_mask.defined()) {
    check_tensor(op, "key_padding_mask", key_padding_mask, q, {p.B, p.S}, DType::b8);
    p.mask = static_cast<const uint8_t*>(key_padding_mask.data_ptr());
    p.mask_sb = key_padding_mask.stride(0);
    p.mask_ss = key_padding_mask.stride(1);
  }
  return p;
}

Operand operand(const Tensor& t) {
  const int64_t elems16 = 16 / int64_t(dtype_size(t.dtype()));  // elements in 16 bytes
  const bool rows16 = t.stride(3) == 1 && reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0 &&
                      t.stride(0) % elems16 == 0 && t.stride(1) % elems16 == 0 &&
                      t.stride(2) % elems16 == 0;
  return {t.data_ptr(), t.stride(0), t.stride(1), t.stride(2), t.stride(3), rows16};
}

RowOperand row_operand(const Tensor& t) {
  return {t.data_ptr(), t.stride(0), t.stride(1), t.stride(2)};
}

}  // namespace tessera::kernels::cuda::attention_detail

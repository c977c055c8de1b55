// Validation, operand access and per-tile element-wise work shared by the CPU attention kernels.
#include "kernels/cpu/attention_common.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/philox.h"

namespace tessera::kernels::cpu::attention_detail {

int64_t Problem::key_end(int64_t t0, int64_t nq) const {
  return causal ? std::clamp<int64_t>(t0 + nq + shift, 0, S) : S;
}

int64_t Problem::query_begin(int64_t s0) const { return causal ? std::max<int64_t>(0, s0 - shift) : 0; }

void check_tensor(const char* op, const char* name, const Tensor& t, const Shape& shape, DType dtype,
                  bool floating_ok) {
  TS_CHECK(t.defined(), op, "expected ", name, " to be defined, got an undefined tensor");
  TS_CHECK(t.shape() == shape, op, "expected ", name, " of shape ", shape_str(shape), ", got ",
           t.describe());
  TS_CHECK(floating_ok ? is_floating(t.dtype()) : t.dtype() == dtype, op, "expected ", name,
           " of dtype ", floating_ok ? "f32, f16 or bf16" : dtype_name(dtype), ", got ", t.describe());
}

Problem make_problem(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                     const Tensor& key_padding_mask, const AttentionOptions& opts) {
  TS_CHECK(q.defined() && k.defined() && v.defined() && q.dim() == 4 && k.dim() == 4, op,
           "expected q (B, H, T, D) and k, v (B, H, S, D), got ", q.describe(), ", ", k.describe(), ", ",
           v.describe());
  Problem p;
  p.B = q.size(0), p.H = q.size(1), p.T = q.size(2), p.D = q.size(3), p.S = k.size(2);
  check_tensor(op, "q", q, q.shape(), q.dtype(), true);
  check_tensor(op, "k", k, {p.B, p.H, p.S, p.D}, q.dtype(), false);
  check_tensor(op, "v", v, {p.B, p.H, p.S, p.D}, q.dtype(), false);
  TS_CHECK(opts.dropout_p >= 0.0f && opts.dropout_p < 1.0f, op, "expected dropout_p in [0, 1), got ",
           opts.dropout_p);
  p.scale = opts.scale != 0.0f ? opts.scale : 1.0f / std::sqrt(float(std::max<int64_t>(p.D, 1)));
  p.causal = opts.causal;
  p.shift = p.S - p.T;
  p.dropout_p = opts.dropout_p;
  p.seed = opts.seed;
  p.dropout = attention_dropout_grid(op, opts, p.H, p.T, p.S);
  if (key_padding_mask.defined()) {
    check_tensor(op, "key_padding_mask", key_padding_mask, {p.B, p.S}, DType::b8, false);
    p.mask = static_cast<const bool*>(key_padding_mask.data_ptr());
    p.mask_sb = key_padding_mask.stride(0);
    p.mask_ss = key_padding_mask.stride(1);
  }
  return p;
}

HeadRows head_rows(const Tensor& t) {
  const int64_t rows = t.size(2), d = t.size(3);
  const bool readable =
      t.dtype() == DType::f32 && (d <= 1 || t.stride(3) == 1) && (rows <= 1 || t.stride(2) >= d);
  HeadRows r;
  r.keep = readable ? t : (t.dtype() == DType::f32 ? t.clone() : t.to(DType::f32));
  r.data = static_cast<const float*>(r.keep.data_ptr());
  r.sb = r.keep.stride(0);
  r.sh = r.keep.stride(1);
  r.ld = rows <= 1 ? std::max<int64_t>(d, 1) : r.keep.stride(2);
  return r;
}

bool tile_needs_mask(const Problem& p, const Tile& tile) {
  return p.mask != nullptr || (p.causal && tile.s0 + tile.nk - 1 > tile.t0 + p.shift);
}

void mask_tile(const Problem& p, int64_t b, const Tile& tile) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < tile.nk; ++i) {
    const int64_t s = tile.s0 + i;
    float* col = tile.data + i * tile.k_stride;
    // Padding hides the key from every query; the causal diagonal from queries t < s - shift.
    const bool padded = p.mask != nullptr && !p.mask[b * p.mask_sb + s * p.mask_ss];
    const int64_t hidden =
        padded ? tile.nq : (p.causal ? std::clamp<int64_t>(s - p.shift - tile.t0, 0, tile.nq) : 0);
    for (int64_t j = 0; j < hidden; ++j) col[j * tile.q_stride] = kNegInf;
  }
}

void dropout_factors(const Problem& p, int64_t bh, const Tile& tile) {
  const float keep_scale = 1.0f / (1.0f - p.dropout_p);
  for (int64_t j = 0; j < tile.nq; ++j) {
    const uint64_t base = attention_dropout_index(p.dropout, bh, tile.t0 + j, tile.s0);
    float* row = tile.data + j * tile.q_stride;
    for (int64_t i = 0; i < tile.nk; ++i) {
      const float u = philox_uniform(p.seed, base + uint64_t(i));
      row[i * tile.k_stride] = u >= p.dropout_p ? keep_scale : 0.0f;
    }
  }
}

void store_block(const float* src, int64_t src_rs, int64_t src_cs, int64_t rows, int64_t cols,
                 const Tensor& t, int64_t base, int64_t dst_rs, int64_t dst_cs) {
  dispatch_floating(t.dtype(), "attention", [&]<typename T>() {
    T* dst = static_cast<T*>(t.data_ptr()) + base;
    if (src_cs == 1 && dst_cs == 1) {  // dense rows: a loop the compiler vectorises
      for (int64_t r = 0; r < rows; ++r) {
        const float* in = src + r * src_rs;
        T* o = dst + r * dst_rs;
        for (int64_t c = 0; c < cols; ++c) o[c] = T(in[c]);
      }
      return;
    }
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) dst[r * dst_rs + c * dst_cs] = T(src[r * src_rs + c * src_cs]);
    }
  });
}

}  // namespace tessera::kernels::cpu::attention_detail

// Internal pieces shared by the CPU attention forward and backward: the validated problem, per-head
// access to strided operands, and the element-wise work on one score tile (masking, dropout, exp).
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "kernels/attention_dropout.h"
#include "kernels/kernels.h"

namespace tessera::kernels::cpu::attention_detail {

// Query and key tile sizes: multiples of both micro-kernels' tile widths (AVX2 16, AVX-512 48).
// Measured flat between 64 and 192 queries and 96 and 192 keys (GPT-2 shapes, D = 64).
inline constexpr int64_t kBlockQ = 96;
inline constexpr int64_t kBlockK = 192;

// The validated geometry and options of one attention call.
struct Problem {
  int64_t B = 0, H = 0, T = 0, S = 0, D = 0;
  float scale = 1.0f;
  bool causal = false;
  int64_t shift = 0;  // causal: query t sees keys s <= t + shift (shift = S - T)
  float dropout_p = 0.0f;
  uint64_t seed = 0;
  AttentionDropoutGrid dropout;  // where these probabilities sit in the layer's dropout draw
  const bool* mask = nullptr;  // key padding mask (B, S), true = attend; null when absent
  int64_t mask_sb = 0, mask_ss = 0;

  // One past the last key any query in [t0, t0 + nq) may see.
  int64_t key_end(int64_t t0, int64_t nq) const;
  // The first query that may see key s0.
  int64_t query_begin(int64_t s0) const;
};

// Checks q (B, H, T, D), k and v (B, H, S, D) and the mask (B, S), and resolves the options.
Problem make_problem(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                     const Tensor& key_padding_mask, const AttentionOptions& opts);

// Checks that t has the given shape (and dtype, unless `floating_ok`, which takes any float dtype).
void check_tensor(const char* op, const char* name, const Tensor& t, const Shape& shape, DType dtype,
                  bool floating_ok);

// The rows of a (B, H, L, D) tensor as f32 with inner stride 1, which sgemm reads in place: the
// tensor itself when it already is that (a permuted view of a fused QKV projection is), else a
// dense f32 copy held in `keep`.
struct HeadRows {
  Tensor keep;
  const float* data = nullptr;
  int64_t sb = 0, sh = 0, ld = 0;
  const float* head(int64_t b, int64_t h) const { return data + b * sb + h * sh; }
};
HeadRows head_rows(const Tensor& t);

// A score tile of queries [t0, t0 + nq) and keys [s0, s0 + nk): the entry of (query t0 + j, key
// s0 + i) is at data[j * q_stride + i * k_stride]. Forward tiles are (queries, keys), backward
// tiles (keys, queries).
struct Tile {
  float* data;
  int64_t t0, nq, s0, nk;
  int64_t q_stride, k_stride;
};

// Whether some entry of the tile is hidden by the padding mask or the causal diagonal.
bool tile_needs_mask(const Problem& p, const Tile& tile);
// Sets the entries the padding mask of batch b or the causal diagonal hides to -inf.
void mask_tile(const Problem& p, int64_t b, const Tile& tile);
// Replaces each entry by 1 / (1 - p) where the dropout keeps probability (t, s) of head bh, else
// 0: keep = philox_uniform(seed, attention_dropout_index(dropout, bh, t, s)) >= p.
void dropout_factors(const Problem& p, int64_t bh, const Tile& tile);

// dst = src (element (r, c) at src[r * src_rs + c * src_cs]) written into t's elements from
// element offset `base` with strides (dst_rs, dst_cs), rounding to t's floating dtype.
void store_block(const float* src, int64_t src_rs, int64_t src_cs, int64_t rows, int64_t cols,
                 const Tensor& t, int64_t base, int64_t dst_rs, int64_t dst_cs);

}  // namespace tessera::kernels::cpu::attention_detail

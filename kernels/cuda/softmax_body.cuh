// Softmax, log-softmax and their backwards over the last dim as portable bodies over simt.cuh: one
// warp per row for rows up to kBlockCols, one block per row above. softmax.cu runs them as CUDA
// kernels; tests/kernels/emulated/softmax_test.cc runs them under the SIMT emulator.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/half.h"
#include "core/macros.h"
#include "kernels/cuda/simt.cuh"
#include "kernels/math.h"

namespace tessera::kernels::cuda::softmax_body {

enum class Kind : uint8_t { softmax, log_softmax, softmax_backward, log_softmax_backward };

inline constexpr int kThreads = 256;
inline constexpr int kWarps = kThreads / 32;
inline constexpr int64_t kBlockCols = 1024;   // longer rows take a whole block
inline constexpr int64_t kMaxBlocks = 65536;  // grid-stride loops cover the rest
inline constexpr size_t kSharedBytes = sizeof(float) * kWarps;

// Launch geometry, shared by the launcher and the emulated tests.
TS_HOST_DEVICE inline bool block_rows(int64_t cols) { return cols > kBlockCols; }
TS_HOST_DEVICE inline int64_t rows_per_block(int64_t cols) { return block_rows(cols) ? 1 : kWarps; }
TS_HOST_DEVICE inline int64_t blocks_for(int64_t n_rows, int64_t cols) {
  const int64_t per = rows_per_block(cols);
  const int64_t blocks = (n_rows + per - 1) / per;
  return blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks);
}

// a: x (forward) or y (backward), b: grad_y (backward only), out: out or grad_x. `rows` maps a row
// index to the {a, b, out} offsets of the row's first element (`rows.get(r).v[k]`): the CUDA
// launcher's OffsetCalc on the GPU, any equivalent in tests.
template <typename T, typename Rows>
struct Params {
  const T* a;
  const T* b;
  T* out;
  Rows rows;
  int64_t sa, sb, so;  // last-dim strides
  int64_t n_rows, cols;
  Kind kind;
};

// Max (the CPU's `v > m` rule: NaN never wins, it surfaces through exp) or sum over a warp or the
// block; every thread of the group gets the result. `scratch` holds kWarps floats.
template <bool kBlock>
TS_SIMT float group_reduce(float v, bool is_max, float* scratch, int tid) {
  TS_UNROLL
  for (int off = 16; off > 0; off /= 2) {
    const float o = simt::shfl_down(v, off);
    v = is_max ? (o > v ? o : v) : v + o;
  }
  v = simt::shfl(v, 0);
  if constexpr (kBlock) {
    const int lane = tid % 32, warp = tid / 32;
    if (lane == 0) scratch[warp] = v;
    simt::sync_block();
    v = scratch[0];
    for (int w = 1; w < kWarps; ++w)
      v = is_max ? (scratch[w] > v ? scratch[w] : v) : v + scratch[w];
    simt::sync_block();  // scratch is reused by the next reduction
  }
  return v;
}

// Every row of the problem, kThreads threads per block, `blocks` blocks in a grid-stride loop:
// kBlock, one row per block pass; else one row per warp.
template <typename T, bool kBlock>
struct RowsBody {
  template <typename Rows>
  static TS_SIMT void run(const Params<T, Rows>& p, int64_t blocks, int64_t block, int tid,
                          unsigned char* shared) {
    float* scratch = reinterpret_cast<float*>(shared);
    const int group = kBlock ? kThreads : 32;
    const int rank = kBlock ? tid : tid % 32;
    const int64_t per_block = kBlock ? 1 : kWarps;
    const int64_t first = block * per_block + (kBlock ? 0 : tid / 32);
    const int64_t n = p.cols;
    // `row` is uniform across each group, so the group's shuffles and barriers stay converged.
    for (int64_t row = first; row < p.n_rows; row += blocks * per_block) {
      const auto o = p.rows.get(row);
      const T* a = p.a + o.v[0];
      const T* b = p.b + o.v[1];
      T* out = p.out + o.v[2];
      switch (p.kind) {
        case Kind::softmax:
        case Kind::log_softmax: {
          float m = -INFINITY;
          for (int64_t i = rank; i < n; i += group) {
            const float v = float(a[i * p.sa]);
            m = v > m ? v : m;
          }
          m = group_reduce<kBlock>(m, true, scratch, tid);
          float s = 0.0f;
          for (int64_t i = rank; i < n; i += group) s += math::exp(float(a[i * p.sa]) - m);
          s = group_reduce<kBlock>(s, false, scratch, tid);
          if (p.kind == Kind::softmax) {
            const float inv = 1.0f / s;
            for (int64_t i = rank; i < n; i += group)
              out[i * p.so] = T(math::exp(float(a[i * p.sa]) - m) * inv);
          } else {
            // (x - m) - log(s), not x - (m + log(s)): the latter loses digits when |m| is large.
            const float log_s = ::logf(s);
            for (int64_t i = rank; i < n; i += group)
              out[i * p.so] = T((float(a[i * p.sa]) - m) - log_s);
          }
          break;
        }
        case Kind::softmax_backward: {
          float dot = 0.0f;
          for (int64_t i = rank; i < n; i += group) dot += float(a[i * p.sa]) * float(b[i * p.sb]);
          dot = group_reduce<kBlock>(dot, false, scratch, tid);
          for (int64_t i = rank; i < n; i += group) {
            const float y = float(a[i * p.sa]);
            out[i * p.so] = T(y * (float(b[i * p.sb]) - dot));
          }
          break;
        }
        case Kind::log_softmax_backward: {
          float total = 0.0f;
          for (int64_t i = rank; i < n; i += group) total += float(b[i * p.sb]);
          total = group_reduce<kBlock>(total, false, scratch, tid);
          for (int64_t i = rank; i < n; i += group)
            out[i * p.so] = T(float(b[i * p.sb]) - math::exp(float(a[i * p.sa])) * total);
          break;
        }
      }
    }
  }
};

}  // namespace tessera::kernels::cuda::softmax_body

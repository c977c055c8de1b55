// The row pass of every CUDA attention backward: per (b, h, t) row, delta = sum_c dO * O and the
// lse to subtract when recomputing probabilities. A portable body (simt.cuh), so the emulated tests
// run the whole 16-bit backward path.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cuda/attention_common.h"
#include "kernels/cuda/simt.cuh"

namespace tessera::kernels::cuda::attention_detail {

// Blocks of the row pass: one warp per row, kWarps rows per block.
TS_HOST_DEVICE inline int64_t row_stats_blocks(const Problem& p) {
  return (p.B * p.H * p.T + kWarps - 1) / kWarps;
}

// One warp per row: delta = sum_c dO * O, and lse_use = lse, or +inf for a query with no visible
// key (lse = -inf) so its recomputed probabilities exp(s - lse) are 0, not NaN. Outputs are dense
// (B, H, T) f32.
template <typename T>
TS_SIMT void row_stats(const Problem& p, const Operand& out, const Operand& grad_out,
                       const RowOperand& lse, float* delta, float* lse_use, int64_t block,
                       int tid) {
  const int64_t row = block * kWarps + (tid >> 5);
  const int lane = tid & 31;
  if (row >= p.B * p.H * p.T) return;  // whole warps leave together
  const int64_t t = row % p.T, bh = row / p.T, b = bh / p.H, h = bh % p.H;
  const T* o = static_cast<const T*>(out.data) + b * out.sb + h * out.sh + t * out.sl;
  const T* go =
      static_cast<const T*>(grad_out.data) + b * grad_out.sb + h * grad_out.sh + t * grad_out.sl;
  float acc = 0.0f;
  for (int c = lane; c < p.D; c += 32) {
    acc += float(o[int64_t(c) * out.sd]) * float(go[int64_t(c) * grad_out.sd]);
  }
  acc = simt::warp_sum(acc);
  if (lane == 0) {
    const float l = static_cast<const float*>(lse.data)[b * lse.sb + h * lse.sh + t * lse.st];
    delta[row] = acc;
    lse_use[row] = l == -INFINITY ? INFINITY : l;
  }
}

}  // namespace tessera::kernels::cuda::attention_detail

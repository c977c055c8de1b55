// Body of the CUDA multi-tensor Adam / AdamW kernel (adam.cu) over kernels/cuda/simt.cuh, so it
// also runs under the SIMT emulator: the table of tensors one launch updates, how it is filled and
// sized, and the per-chunk update through adam_math.h's adam_element.
#pragma once

#include <cstdint>

#include "kernels/adam_math.h"
#include "kernels/cuda/simt.cuh"

namespace tessera::kernels::cuda::adam_body {

inline constexpr int kMaxTensors = 48;    // keeps the table well under the 4 KB parameter limit
inline constexpr int64_t kChunk = 16384;  // elements per block
inline constexpr int kThreads = 512;
inline constexpr int64_t kMaxBlocks = 1 << 20;  // the block loop covers the rest

// Up to kMaxTensors tensors of one (param, grad) dtype pair. Zero-initialised, then filled by
// table_add; first_chunk[count] is always the total number of chunks.
template <typename P, typename G>
struct MultiTable {
  P* param[kMaxTensors];
  const G* grad[kMaxTensors];
  float* exp_avg[kMaxTensors];
  float* exp_avg_sq[kMaxTensors];
  int64_t numel[kMaxTensors];
  int64_t first_chunk[kMaxTensors + 1];  // chunks of tensor t: [first_chunk[t], first_chunk[t + 1])
  int count;
};

// Appends a tensor of n > 0 elements (the kernel gives every entry at least one chunk). The table
// must not be full.
template <typename P, typename G>
inline void table_add(MultiTable<P, G>& table, P* param, const G* grad, float* exp_avg,
                      float* exp_avg_sq, int64_t n) {
  const int k = table.count++;
  table.param[k] = param;
  table.grad[k] = grad;
  table.exp_avg[k] = exp_avg;
  table.exp_avg_sq[k] = exp_avg_sq;
  table.numel[k] = n;
  table.first_chunk[k + 1] = table.first_chunk[k] + (n + kChunk - 1) / kChunk;
}

// Blocks of the launch for a table: one per chunk, capped.
template <typename P, typename G>
inline unsigned table_blocks(const MultiTable<P, G>& table) {
  const int64_t chunks = table.first_chunk[table.count];
  return unsigned(chunks < 1 ? 1 : (chunks > kMaxBlocks ? kMaxBlocks : chunks));
}

// Block `block` of `blocks` updates chunks block, block + blocks, ...; its `threads` threads
// stride over each chunk's elements.
template <typename P, typename G>
TS_SIMT void adam_multi(const MultiTable<P, G>& table, const AdamCoeffs& c, int64_t block,
                        int64_t blocks, int tid, int threads) {
  const int64_t chunks = table.first_chunk[table.count];
  for (int64_t b = block; b < chunks; b += blocks) {
    int t = 0;
    while (table.first_chunk[t + 1] <= b) ++t;
    const int64_t begin = (b - table.first_chunk[t]) * kChunk;
    const int64_t end = table.numel[t] < begin + kChunk ? table.numel[t] : begin + kChunk;
    P* p = table.param[t];
    const G* g = table.grad[t];
    float* m = table.exp_avg[t];
    float* v = table.exp_avg_sq[t];
    for (int64_t i = begin + tid; i < end; i += threads) {
      float pv = float(p[i]);
      float mv = m[i], vv = v[i];
      adam_element(pv, float(g[i]), mv, vv, c);
      p[i] = P(pv);
      m[i] = mv;
      v[i] = vv;
    }
  }
}

}  // namespace tessera::kernels::cuda::adam_body

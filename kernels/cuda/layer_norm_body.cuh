// Layer norm kernel bodies over kernels/cuda/simt.cuh: forward, grad_x, and the deterministic
// grad_weight / grad_bias reduction (per-chunk partials, then a chunk-ordered sum). layer_norm.cu
// wraps them as CUDA kernels; tests/kernels/emulated/layer_norm_test.cc runs them on the CPU.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/half.h"
#include "core/macros.h"
#include "kernels/cuda/simt.cuh"

namespace tessera::kernels::cuda::layer_norm_body {

inline constexpr int kWarpRowsMaxC = 1024;  // up to this many channels a row gets one warp
inline constexpr int kWarpThreads = 256;    // 8 warps = 8 rows per block
inline constexpr int kBlockThreads = 512;   // one block per row above kWarpRowsMaxC
inline constexpr int64_t kMaxBlocks = 65536;

// Parameter-gradient partials: a block covers kColTile channels with kRowLanes row lanes.
inline constexpr int kColTile = 32, kRowLanes = 8;
inline constexpr int kPartialThreads = kColTile * kRowLanes;
inline constexpr int kSumThreads = 256;  // threads per block of the chunk-ordered sum

// Shared memory of each body, in bytes.
inline constexpr size_t kForwardSharedBytes = 3 * 32 * sizeof(float);  // Welford n, mean, m2
inline constexpr size_t kGradXSharedBytes = 32 * sizeof(float);        // block_sum scratch
inline constexpr size_t kPartialSharedBytes = 2 * kRowLanes * (kColTile + 1) * sizeof(float);

// Blocks for a grid-stride loop over n items, `per_block` per block.
TS_HOST_DEVICE inline int64_t grid_for(int64_t n, int64_t per_block, int64_t cap = kMaxBlocks) {
  return simt::grid_blocks(n, per_block, cap);
}

// The row kernels' launch: threads per block, the row-group size (32: a warp per row; else the
// whole block per row) and the number of blocks.
struct RowLaunch {
  int threads, group;
  int64_t blocks;
};
TS_HOST_DEVICE inline RowLaunch row_launch(int64_t rows, int64_t C) {
  if (C <= kWarpRowsMaxC) return {kWarpThreads, 32, grid_for(rows, kWarpThreads / 32)};
  return {kBlockThreads, kBlockThreads, grid_for(rows, 1)};
}

// The fixed split of rows into chunks for the parameter gradients: at most 1024 chunks of at least
// 32 rows, a function of the shape only (determinism). Grid: col_blocks x chunks.
struct ParamLaunch {
  int64_t rows_per_chunk, chunks, col_blocks;
};
TS_HOST_DEVICE inline ParamLaunch param_launch(int64_t rows, int64_t C) {
  const int64_t min_rows = (rows + 1023) / 1024;
  const int64_t rows_per_chunk = min_rows > 32 ? min_rows : 32;
  return {rows_per_chunk, (rows + rows_per_chunk - 1) / rows_per_chunk,
          (C + kColTile - 1) / kColTile};
}

struct Welford {
  float n = 0.0f, mean = 0.0f, m2 = 0.0f;
};

TS_SIMT void welford_add(Welford& a, float v) {
  a.n += 1.0f;
  const float d = v - a.mean;
  a.mean += d / a.n;
  a.m2 += d * (v - a.mean);
}

TS_SIMT void welford_merge(Welford& a, const Welford& b) {
  const float n = a.n + b.n;
  if (n == 0.0f) return;
  const float delta = b.mean - a.mean, fb = b.n / n;
  a.mean += delta * fb;
  a.m2 += b.m2 + delta * delta * a.n * fb;
  a.n = n;
}

// Statistics over the row group (a warp, or the whole block when group == threads), the same bits
// in every thread of the group. `shared` holds 3 * 32 floats.
TS_SIMT Welford group_welford(Welford w, int group, int tid, int threads, float* shared) {
  for (int o = 16; o > 0; o >>= 1) {
    Welford other;
    other.n = simt::shfl_xor(w.n, o);
    other.mean = simt::shfl_xor(w.mean, o);
    other.m2 = simt::shfl_xor(w.m2, o);
    welford_merge(w, other);
  }
  // The merge is not commutative bit for bit: take lane 0's result.
  w.n = simt::shfl(w.n, 0);
  w.mean = simt::shfl(w.mean, 0);
  w.m2 = simt::shfl(w.m2, 0);
  if (group == 32) return w;
  const int lane = tid & 31, warp = tid >> 5, warps = threads >> 5;
  simt::sync_block();  // the previous row's readers are done with shared
  if (lane == 0) {
    shared[warp] = w.n;
    shared[32 + warp] = w.mean;
    shared[64 + warp] = w.m2;
  }
  simt::sync_block();
  Welford total;
  for (int k = 0; k < warps; ++k)
    welford_merge(total, Welford{shared[k], shared[32 + k], shared[64 + k]});
  return total;
}

// Sum over the row group, the same bits in every thread of it. `shared` holds 32 floats.
TS_SIMT float group_sum(float v, int group, int tid, int threads, float* shared) {
  return group == 32 ? simt::warp_sum(v) : simt::block_sum(v, shared, tid, threads);
}

// x, y: (rows, C) contiguous; w, b: (C) f32 or null; mean, rstd: (rows) f32 contiguous. Launch
// geometry from row_launch.
template <typename T>
struct Forward {
  static TS_SIMT void run(const T* __restrict__ x, const float* __restrict__ w,
                          const float* __restrict__ b, float eps, T* __restrict__ y,
                          float* __restrict__ mean, float* __restrict__ rstd, int64_t rows,
                          int64_t C, int group, int threads, int64_t blocks, int64_t block, int tid,
                          unsigned char* shared_bytes) {
    float* shared = reinterpret_cast<float*>(shared_bytes);
    const int per_block = threads / group;
    const int gid = tid % group;
    // Loop bounds are uniform over a group, so block-wide barriers in group_welford are safe.
    for (int64_t row = block * per_block + tid / group; row < rows; row += blocks * per_block) {
      const T* xr = x + row * C;
      Welford acc;
      for (int64_t i = gid; i < C; i += group) welford_add(acc, float(xr[i]));
      const Welford s = group_welford(acc, group, tid, threads, shared);
      const float mu = s.mean;
      const float rs = 1.0f / sqrtf(s.m2 / float(C) + eps);
      if (gid == 0) {
        mean[row] = mu;
        rstd[row] = rs;
      }
      T* yr = y + row * C;
      for (int64_t i = gid; i < C; i += group) {
        float v = (float(xr[i]) - mu) * rs;
        if (w) v *= w[i];
        if (b) v += b[i];
        yr[i] = T(v);
      }
    }
  }
};

// dx = rstd * (g*w - mean(g*w) - xhat * mean(g*w*xhat)) per row. All row tensors contiguous.
template <typename T>
struct GradX {
  static TS_SIMT void run(const T* __restrict__ g, const T* __restrict__ x,
                          const float* __restrict__ w, const float* __restrict__ mean,
                          const float* __restrict__ rstd, T* __restrict__ dx, int64_t rows,
                          int64_t C, int group, int threads, int64_t blocks, int64_t block, int tid,
                          unsigned char* shared_bytes) {
    float* shared = reinterpret_cast<float*>(shared_bytes);
    const int per_block = threads / group;
    const int gid = tid % group;
    for (int64_t row = block * per_block + tid / group; row < rows; row += blocks * per_block) {
      const T* gr = g + row * C;
      const T* xr = x + row * C;
      const float mu = mean[row], rs = rstd[row];
      float s1 = 0.0f, s2 = 0.0f;
      for (int64_t i = gid; i < C; i += group) {
        const float wg = w ? float(gr[i]) * w[i] : float(gr[i]);
        s1 += wg;
        s2 += wg * ((float(xr[i]) - mu) * rs);
      }
      const float m1 = group_sum(s1, group, tid, threads, shared) / float(C);
      const float m2 = group_sum(s2, group, tid, threads, shared) / float(C);
      T* dr = dx + row * C;
      for (int64_t i = gid; i < C; i += group) {
        const float wg = w ? float(gr[i]) * w[i] : float(gr[i]);
        const float xh = (float(xr[i]) - mu) * rs;
        dr[i] = T(rs * (wg - m1 - xh * m2));
      }
    }
  }
};

// Partials over one chunk of rows for kColTile channels: dw_part[chunk, c] = sum g * xhat,
// db_part[chunk, c] = sum g. Either output may be null. tid = lane_y * kColTile + lane_x over
// kPartialThreads threads; the grid is col_blocks x chunks (param_launch).
template <typename T>
struct ParamPartials {
  static TS_SIMT void run(const T* __restrict__ g, const T* __restrict__ x,
                          const float* __restrict__ mean, const float* __restrict__ rstd,
                          int64_t rows, int64_t C, int64_t rows_per_chunk,
                          float* __restrict__ dw_part, float* __restrict__ db_part,
                          int64_t col_block, int64_t chunk, int tid, unsigned char* shared_bytes) {
    float* sw = reinterpret_cast<float*>(shared_bytes);  // [kRowLanes][kColTile + 1]
    float* sb = sw + kRowLanes * (kColTile + 1);
    const int tx = tid % kColTile, ty = tid / kColTile;
    const int64_t c = col_block * kColTile + tx;
    const int64_t r_next = (chunk + 1) * rows_per_chunk;
    const int64_t r_end = rows < r_next ? rows : r_next;
    float aw = 0.0f, ab = 0.0f;
    if (c < C) {
      for (int64_t r = chunk * rows_per_chunk + ty; r < r_end; r += kRowLanes) {
        const float gv = float(g[r * C + c]);
        aw += gv * ((float(x[r * C + c]) - mean[r]) * rstd[r]);
        ab += gv;
      }
    }
    sw[ty * (kColTile + 1) + tx] = aw;
    sb[ty * (kColTile + 1) + tx] = ab;
    simt::sync_block();
    if (ty == 0 && c < C) {
      float tw = 0.0f, tb = 0.0f;
      for (int k = 0; k < kRowLanes; ++k) {
        tw += sw[k * (kColTile + 1) + tx];
        tb += sb[k * (kColTile + 1) + tx];
      }
      if (dw_part) dw_part[chunk * C + c] = tw;
      if (db_part) db_part[chunk * C + c] = tb;
    }
  }
};

// out[c] = sum over chunks of part[chunk, c], in chunk order; grid_for(C, threads) blocks.
struct SumPartials {
  static TS_SIMT void run(const float* __restrict__ part, int64_t chunks, int64_t C,
                          float* __restrict__ out, int threads, int64_t blocks, int64_t block,
                          int tid) {
    for (int64_t c = block * threads + tid; c < C; c += blocks * threads) {
      float t = 0.0f;
      for (int64_t k = 0; k < chunks; ++k) t += part[k * C + c];
      out[c] = t;
    }
  }
};

}  // namespace tessera::kernels::cuda::layer_norm_body

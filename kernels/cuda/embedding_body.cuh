// Bodies of the CUDA embedding kernels (embedding.cu) over kernels/cuda/simt.cuh, so they also run
// under the SIMT emulator: the forward row copy, the backward's key fill and bitonic sort steps,
// and the per-id run accumulation, plus the launch geometry the launchers and tests share.
#pragma once

#include <cstdint>

#include "core/macros.h"
#include "kernels/cuda/simt.cuh"

namespace tessera::kernels::cuda::embedding_body {

using u64 = unsigned long long;  // the keys' type: one id (high 32 bits) and one position (low)

inline constexpr u64 kNoId = 0xFFFFFFFFull;  // key id of padding and of out-of-range ids (skipped)
inline constexpr int64_t kSortTile = 2048;   // keys sorted in shared memory per block (16 KB)
inline constexpr size_t kSortSharedBytes = sizeof(u64) * size_t(kSortTile);
inline constexpr int kThreads = 256;            // forward, key fill and global sort steps
inline constexpr int kAccumulateWarps = 4;      // sorted entries per accumulate block
inline constexpr int64_t kMaxBlocks = 1 << 20;  // grid-stride loops cover the rest

// Blocks for a grid-stride loop over n items.
inline unsigned grid_for(int64_t n, int threads) {
  return unsigned(simt::grid_blocks(n, threads, kMaxBlocks));
}

// Keys sorted by the backward: n rounded up to a power of two, at least 2.
inline u64 padded_keys(int64_t n) {
  u64 padded = 2;
  while (padded < u64(n)) padded <<= 1;
  return padded;
}

// Keys per shared-memory tile, and the threads of a tile block: one pair per thread, but at least
// a warp (small sorts), the extra threads only meeting the barriers.
inline u64 sort_tile(u64 padded) { return padded < u64(kSortTile) ? padded : u64(kSortTile); }
inline int sort_tile_threads(u64 tile) { return tile / 2 < 32 ? 32 : int(tile / 2); }

// The accumulate grid: x over sorted entries (kAccumulateWarps each), y over 32-channel groups.
struct AccumulateGrid {
  unsigned x, y;
};
inline AccumulateGrid accumulate_grid(int64_t n, int64_t C) {
  const int64_t groups = (C + 31) / 32;
  return {unsigned((n + kAccumulateWarps - 1) / kAccumulateWarps),
          unsigned(groups < 65535 ? groups : 65535)};
}

// The bitonic sort of `padded` keys as a sequence of launches: tile(0) sorts every tile up to stage
// k = tile; then each later stage k runs global(k, j) for its steps j >= tile and tile(k) for the
// steps below, which stay inside one tile.
template <typename TileStep, typename GlobalStep>
inline void bitonic_schedule(u64 padded, TileStep&& tile_step, GlobalStep&& global_step) {
  const u64 tile = sort_tile(padded);
  tile_step(u64(0));
  for (u64 k = 2 * tile; k <= padded; k <<= 1) {
    for (u64 j = k / 2; j >= tile; j >>= 1) global_step(k, j);
    tile_step(k);
  }
}

// Ids outside [0, V) read zeros and are never written.
template <typename IdT>
TS_SIMT bool valid_id(IdT id, int64_t V) {
  return int64_t(id) >= 0 && int64_t(id) < V;
}

// out (n, C) = w[ids] with w's rows w_stride elements apart. E is the element's bit pattern type.
template <typename IdT, typename E>
TS_SIMT void embedding_forward(const E* w, int64_t w_stride, int64_t V, const IdT* ids, E* out,
                               int64_t n, int64_t C, int64_t block, int64_t blocks, int tid,
                               int threads) {
  const int64_t total = n * C;
  for (int64_t e = block * threads + tid; e < total; e += blocks * threads) {
    const int64_t i = e / C, c = e - i * C;
    const IdT id = ids[i];
    out[e] = valid_id(id, V) ? w[int64_t(id) * w_stride + c] : E(0);
  }
}

// keys[i] = id << 32 | i for i < n, all ones for the padding up to the power of two.
template <typename IdT>
TS_SIMT void fill_keys(const IdT* ids, int64_t n, int64_t V, u64 padded, u64* keys, int64_t block,
                       int64_t blocks, int tid, int threads) {
  for (u64 i = u64(block) * u64(threads) + u64(tid); i < padded; i += u64(blocks) * u64(threads)) {
    if (i < u64(n)) {
      const IdT id = ids[i];
      keys[i] = ((valid_id(id, V) ? u64(id) : kNoId) << 32) | i;
    } else {
      keys[i] = ~0ull;
    }
  }
}

// One compare-exchange of a bitonic step: the pair (i, l), ascending or not.
TS_SIMT void compare_exchange(u64* a, u64 i, u64 l, bool ascending) {
  const u64 x = a[i], y = a[l];
  if ((x > y) == ascending) {
    a[i] = y;
    a[l] = x;
  }
}

// Step (k, j) over all keys: pair t is (i, i + j).
TS_SIMT void bitonic_global(u64* keys, u64 padded, u64 k, u64 j, int64_t block, int64_t blocks,
                            int tid, int threads) {
  for (u64 t = u64(block) * u64(threads) + u64(tid); t < padded / 2;
       t += u64(blocks) * u64(threads)) {
    const u64 i = (t / j) * 2 * j + t % j;
    compare_exchange(keys, i, i + j, (i & k) == 0);
  }
}

// Steps whose pairs lie inside one tile of `tile` keys (tile / 2 pairs over the block's threads;
// shared holds kSortSharedBytes): with k == 0 the whole sort up to stage k = tile, else the steps
// j < tile of stage k.
TS_SIMT void bitonic_tile(u64* keys, u64 tile, u64 k, int64_t block, int tid, int threads,
                          unsigned char* shared) {
  u64* s = reinterpret_cast<u64*>(shared);
  const u64 base = u64(block) * tile, half = tile / 2;
  for (u64 t = u64(tid); t < half; t += u64(threads)) {
    s[t] = keys[base + t];
    s[t + half] = keys[base + t + half];
  }
  simt::sync_block();
  const u64 k_first = k == 0 ? 2 : k, k_last = k == 0 ? tile : k;
  for (u64 kk = k_first; kk <= k_last; kk <<= 1) {
    for (u64 j = (k == 0 ? kk : tile) / 2; j > 0; j >>= 1) {
      for (u64 t = u64(tid); t < half; t += u64(threads)) {
        const u64 i = (t / j) * 2 * j + t % j;
        compare_exchange(s, i, i + j, ((base + i) & kk) == 0);
      }
      simt::sync_block();
    }
  }
  for (u64 t = u64(tid); t < half; t += u64(threads)) {
    keys[base + t] = s[t];
    keys[base + t + half] = s[t + half];
  }
}

// Warp tid / 32 of block (block_x, block_y) takes sorted entry k; when k starts a run of one id,
// its lanes sum the run's rows of g (n, C) into gw[id], in position order, for channels
// block_y * 32 + lane (+ grid_y * 32 ...). Block: kAccumulateWarps warps.
template <typename G, typename W>
TS_SIMT void accumulate_runs(const u64* keys, int64_t n, const G* g, int64_t C, W* gw,
                             int64_t gw_stride, int64_t block_x, int64_t block_y, int64_t grid_y,
                             int tid) {
  const int64_t k = block_x * kAccumulateWarps + (tid >> 5);
  if (k >= n) return;
  const u64 id = keys[k] >> 32;
  if (id == kNoId || (k > 0 && (keys[k - 1] >> 32) == id)) return;
  int64_t end = k + 1;
  while (end < n && (keys[end] >> 32) == id) ++end;
  W* dst = gw + int64_t(id) * gw_stride;
  for (int64_t c = block_y * 32 + (tid & 31); c < C; c += grid_y * 32) {
    float acc = float(dst[c]);
    for (int64_t r = k; r < end; ++r) acc += float(g[int64_t(keys[r] & 0xFFFFFFFFull) * C + c]);
    dst[c] = W(acc);
  }
}

}  // namespace tessera::kernels::cuda::embedding_body

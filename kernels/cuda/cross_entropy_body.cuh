// Cross-entropy fused with log-softmax as portable bodies over simt.cuh: a forward with one block
// per row (online max and sum of exp, row sum for label smoothing) and an element-wise backward
// that may write over the logits. cross_entropy.cu runs them as CUDA kernels;
// tests/kernels/emulated/cross_entropy_test.cc runs them under the SIMT emulator.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/half.h"
#include "core/macros.h"
#include "kernels/cuda/simt.cuh"

namespace tessera::kernels::cuda::cross_entropy_body {

inline constexpr int kBackwardThreads = 256;
inline constexpr int64_t kForwardMaxBlocks = 65536;
inline constexpr int64_t kBackwardMaxBlocks = int64_t(1) << 20;
inline constexpr size_t kForwardSharedBytes = 3 * 32 * sizeof(float);

// Launch geometry, shared by the launcher and the emulated tests: the forward runs a block per row
// (grid-stride above the cap), wider blocks for long rows; the backward a grid-stride loop over
// the N * V elements.
TS_HOST_DEVICE inline int forward_threads(int64_t V) { return V >= 1024 ? 512 : 128; }
TS_HOST_DEVICE inline int64_t forward_blocks(int64_t N) {
  return simt::grid_blocks(N, 1, kForwardMaxBlocks);
}
TS_HOST_DEVICE inline int64_t backward_blocks(int64_t N, int64_t V) {
  return simt::grid_blocks(N * V, kBackwardThreads, kBackwardMaxBlocks);
}

// Running (max, sum of exp(x - max)) of a set of logits; the merge is commutative bit for bit.
struct MaxSum {
  float m = -INFINITY, s = 0.0f;
};

TS_SIMT void max_sum_add(MaxSum& a, float x) {
  if (x > a.m) {
    a.s = a.s * ::expf(a.m - x) + 1.0f;
    a.m = x;
  } else if (a.m > -INFINITY || x != x) {
    // Skips only x == m == -inf (which adds nothing and would add NaN). A NaN logit must reach the
    // sum even when it is a thread's first: the CPU's loss for its row is NaN.
    a.s += ::expf(x - a.m);
  }
}

TS_SIMT MaxSum max_sum_merge(const MaxSum& a, const MaxSum& b) {
  MaxSum r;
  r.m = fmaxf(a.m, b.m);
  r.s = r.m == -INFINITY ? 0.0f : a.s * ::expf(a.m - r.m) + b.s * ::expf(b.m - r.m);
  return r;
}

struct RowIo {
  int64_t N, V;
  int64_t row_stride, col_stride;  // logits / grad_logits, in elements
  const int64_t* targets;
  int64_t target_stride;
  int64_t ignore_index;
  float smoothing;
};

TS_SIMT bool target_ok(int64_t t, int64_t V) { return t >= 0 && t < V; }

// losses[r], lse[r] (f32, their strides) for every row: `threads` threads per block, `blocks`
// blocks in a grid-stride loop over rows; shared holds kForwardSharedBytes.
template <typename T>
struct Forward {
  static TS_SIMT void run(const T* logits, const RowIo& io, float* losses, int64_t loss_stride,
                          float* lse, int64_t lse_stride, int threads, int64_t blocks,
                          int64_t block, int tid, unsigned char* shared) {
    float* sm = reinterpret_cast<float*>(shared);
    float* ss = sm + 32;
    float* sx = sm + 64;
    const int lane = tid & 31, warp = tid >> 5, warps = threads >> 5;
    const bool smooth = io.smoothing != 0.0f;
    for (int64_t r = block; r < io.N; r += blocks) {
      const T* row = logits + r * io.row_stride;
      MaxSum acc;
      float xsum = 0.0f;
      for (int64_t v = tid; v < io.V; v += threads) {
        const float x = float(row[v * io.col_stride]);
        max_sum_add(acc, x);
        if (smooth) xsum += x;
      }
      for (int o = 16; o > 0; o >>= 1) {
        MaxSum other;
        other.m = simt::shfl_xor(acc.m, o);
        other.s = simt::shfl_xor(acc.s, o);
        acc = max_sum_merge(acc, other);
      }
      xsum = simt::warp_sum(xsum);
      simt::sync_block();  // the previous row's thread 0 is done reading the shared arrays
      if (lane == 0) {
        sm[warp] = acc.m;
        ss[warp] = acc.s;
        sx[warp] = xsum;
      }
      simt::sync_block();
      if (tid == 0) {
        MaxSum total;
        float xs = 0.0f;
        for (int k = 0; k < warps; ++k) {
          MaxSum part;
          part.m = sm[k];
          part.s = ss[k];
          total = max_sum_merge(total, part);
          xs += sx[k];
        }
        // The CPU sums exp(x - m), NaN for every x when the max is infinite (a row of -inf, or a
        // +inf logit), so its lse and loss are NaN there; the merged sum would hide that.
        const bool finite_max = total.m > -INFINITY && total.m < INFINITY;
        const float log_s = finite_max ? ::logf(total.s) : NAN;
        lse[r * lse_stride] = total.m + log_s;
        const int64_t t = io.targets[r * io.target_stride];
        float loss;
        if (t == io.ignore_index) {
          loss = 0.0f;
        } else if (!target_ok(t, io.V)) {
          loss = NAN;
        } else {
          // Differences to the max first: lse - x_t loses digits when |m| is large.
          loss = (total.m - float(row[t * io.col_stride])) + log_s;
          if (smooth) {
            const float s = io.smoothing;
            loss = (1.0f - s) * loss + s * ((total.m - xs / float(io.V)) + log_s);
          }
        }
        losses[r * loss_stride] = loss;
      }
    }
  }
};

// out[r, v] = g_r (softmax_v - s / V - (1 - s) [v == t_r]); 0 on ignored rows. out may alias logits
// (each element is read and then written by the same thread). kBackwardThreads threads per block,
// `blocks` blocks in a grid-stride loop over the N * V elements.
template <typename T>
struct Backward {
  static TS_SIMT void run(const T* logits, const RowIo& io, const float* lse, int64_t lse_stride,
                          const float* grad, int64_t grad_stride, T* out, int64_t out_row_stride,
                          int64_t out_col_stride, int64_t blocks, int64_t block, int tid) {
    const int64_t total = io.N * io.V;
    const float per_class = io.smoothing / float(io.V);
    for (int64_t e = block * kBackwardThreads + tid; e < total; e += blocks * kBackwardThreads) {
      const int64_t r = e / io.V, v = e - r * io.V;
      const int64_t t = io.targets[r * io.target_stride];
      float val;
      if (t == io.ignore_index) {
        val = 0.0f;
      } else if (!target_ok(t, io.V)) {
        val = NAN;
      } else {
        const float g = grad[r * grad_stride];
        const float x = float(logits[r * io.row_stride + v * io.col_stride]);
        val = ::expf(x - lse[r * lse_stride]) * g + (-g * per_class);
        if (v == t) val -= g * (1.0f - io.smoothing);
      }
      out[r * out_row_stride + v * out_col_stride] = T(val);
    }
  }
};

}  // namespace tessera::kernels::cuda::cross_entropy_body

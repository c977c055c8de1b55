// Which (query, key) pairs of an attention problem are visible, their dropout factors and the key
// and query ranges a tile needs: host/device code shared by every CUDA attention kernel (and by the
// SIMT emulator that runs the tensor-core kernels in tests).
#pragma once

#include <cstdint>

#include "core/macros.h"
#include "core/philox.h"
#include "kernels/cuda/attention_common.h"

namespace tessera::kernels::cuda::attention_detail {

// Whether query t may see key s of batch b (padding mask and causal diagonal).
TS_HOST_DEVICE TS_INLINE bool visible(const Problem& p, int64_t b, int64_t t, int64_t s) {
  if (p.mask != nullptr && p.mask[b * p.mask_sb + s * p.mask_ss] == 0) return false;
  return !p.causal || s <= t + p.shift;
}

// The dropout factor of probability (t, s) of head bh: keep_scale when philox keeps it, else 0;
// the same counter and compare as the CPU kernels, so both draw the same mask.
TS_HOST_DEVICE TS_INLINE float dropout_factor(const Problem& p, int64_t bh, int64_t t, int64_t s) {
  const uint64_t index = attention_dropout_index(p.dropout, bh, t, s);
  return philox_uniform(p.seed, index) >= p.dropout_p ? p.keep_scale : 0.0f;
}

// One past the last key any query in [t0, t0 + nq) may see.
TS_HOST_DEVICE TS_INLINE int64_t key_end(const Problem& p, int64_t t0, int64_t nq) {
  if (!p.causal) return p.S;
  const int64_t e = t0 + nq + p.shift;
  return e < 0 ? 0 : (e > p.S ? p.S : e);
}

// The first query that may see key s0.
TS_HOST_DEVICE TS_INLINE int64_t query_begin(const Problem& p, int64_t s0) {
  if (!p.causal) return 0;
  return s0 - p.shift > 0 ? s0 - p.shift : 0;
}

}  // namespace tessera::kernels::cuda::attention_detail

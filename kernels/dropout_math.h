// The dropout keep test shared by the CPU and CUDA kernels, so both draw the same mask: element i
// is kept when philox_uniform(seed, offset + i) >= p.
#pragma once

#include <cstdint>

#include "core/macros.h"
#include "core/philox.h"

namespace tessera::kernels {

// philox_uniform is k / 2^24 for the top 24 bits k of the draw, so u >= p exactly when
// k >= ceil(p * 2^24): an integer test that needs no floating compare on the device.
// p in [0, 1]; p = 1 gives 2^24, which no k reaches (nothing kept).
inline uint32_t dropout_threshold(double p) {
  double t = p * 16777216.0;
  uint32_t k = uint32_t(t);
  return double(k) < t ? k + 1 : k;
}

TS_HOST_DEVICE TS_INLINE bool dropout_keep(uint64_t seed, uint64_t index, uint32_t threshold) {
  return (philox(seed, index).v[0] >> 8) >= threshold;
}

// What kept elements are multiplied by: 1 / (1 - p), and 0 when everything is dropped.
inline float dropout_scale(double p) { return p < 1.0 ? float(1.0 / (1.0 - p)) : 0.0f; }

}  // namespace tessera::kernels

// Counter-based random numbers (Philox 4x32-10). A value depends only on (seed, counter), never on
// the device, the thread or how a tensor is split, so sharded and whole draws agree.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/macros.h"

namespace tessera {

struct Philox4 {
  uint32_t v[4];
};

TS_HOST_DEVICE TS_INLINE uint32_t mulhilo(uint32_t a, uint32_t b, uint32_t* hi) {
  uint64_t p = uint64_t(a) * uint64_t(b);
  *hi = uint32_t(p >> 32);
  return uint32_t(p);
}

// Ten Philox rounds on counter (counter, 0, 0) with key seed.
TS_HOST_DEVICE TS_INLINE Philox4 philox(uint64_t seed, uint64_t counter) {
  uint32_t c0 = uint32_t(counter), c1 = uint32_t(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, hi1;
    uint32_t lo0 = mulhilo(0xD2511F53u, c0, &hi0);
    uint32_t lo1 = mulhilo(0xCD9E8D57u, c2, &hi1);
    uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return Philox4{{c0, c1, c2, c3}};
}

// Uniform in [0, 1) with 24 random bits.
TS_HOST_DEVICE TS_INLINE float uint_to_unit_float(uint32_t x) { return float(x >> 8) * (1.0f / 16777216.0f); }

TS_HOST_DEVICE TS_INLINE float philox_uniform(uint64_t seed, uint64_t index) {
  return uint_to_unit_float(philox(seed, index).v[0]);
}

// Standard normal by Box-Muller on two uniforms of the same counter.
TS_HOST_DEVICE TS_INLINE float philox_normal(uint64_t seed, uint64_t index) {
  Philox4 r = philox(seed, index);
  float u1 = (float(r.v[0] >> 8) + 1.0f) * (1.0f / 16777216.0f);  // (0, 1]: log is finite
  float u2 = uint_to_unit_float(r.v[1]);
  return sqrtf(-2.0f * logf(u1)) * cosf(6.283185307179586f * u2);
}

}  // namespace tessera

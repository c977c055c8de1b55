// Embedding test inputs shared by the CUDA and the SIMT-emulated embedding tests: ids that hit a
// few hot rows (the case the atomic-free backward is built for) and output shapes.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/factory.h"

namespace tessera::testing::embedding {

inline Shape with_channels(Shape s, int64_t C) {
  s.push_back(C);
  return s;
}

// ids of `shape` in [0, V) where most positions hit a few hot ids.
inline Tensor skewed_ids(const Shape& shape, int64_t V, DType dt, uint64_t seed) {
  Generator gen(seed);
  const Tensor hot = randint(0, std::min<int64_t>(V, 4), shape, {.dtype = DType::i64}, &gen);
  const Tensor any = randint(0, V, shape, {.dtype = DType::i64}, &gen);
  const Tensor pick = randint(0, 3, shape, {.dtype = DType::i64}, &gen);
  Tensor ids = empty(shape, {.dtype = DType::i64});
  const int64_t* h = hot.data<int64_t>();
  const int64_t* a = any.data<int64_t>();
  const int64_t* p = pick.data<int64_t>();
  int64_t* o = ids.data<int64_t>();
  for (int64_t i = 0; i < ids.numel(); ++i) o[i] = p[i] == 0 ? a[i] : h[i];
  return ids.to(dt);
}

}  // namespace tessera::testing::embedding

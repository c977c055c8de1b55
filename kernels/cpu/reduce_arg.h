// argmax/argmin over one dim for the CPU reductions: the first index on ties and the first NaN's
// index when there is one (PyTorch's rules), threaded over outputs or, for few outputs, over
// pieces of the dim that are merged in order.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/reduce_engine.h"

namespace tessera::kernels::cpu::detail {

template <typename C>
struct ArgBest {
  C value;
  int64_t index;
};

// Whether `v` (later in the dim) replaces `best`: strictly better, or the first NaN.
template <typename C>
inline bool arg_replaces(bool is_max, C v, C best) {
  if (best != best) return false;
  return v != v || (is_max ? v > best : v < best);
}

template <typename T>
ArgBest<compute_t<T>> arg_scan(bool is_max, const T* p, int64_t b, int64_t e, int64_t s) {
  using C = compute_t<T>;
  ArgBest<C> best{C(p[b * s]), b};
  for (int64_t i = b + 1; i < e; ++i) {
    const C v = C(p[i * s]);
    if (arg_replaces(is_max, v, best.value)) best = {v, i};
  }
  return best;
}

// res[m] = index of output m's extreme along the reduced dim; geo.r >= 1, one reduced dim.
template <typename T>
void arg_reduce(bool is_max, const ReduceGeometry& geo, const T* px, int64_t* res) {
  using C = compute_t<T>;
  const int64_t s = geo.inner.row_strides()[0];
  const int64_t parts = geo.m * geo.r < 2 * kGrain ? 1 : split_parts(geo.m, geo.r, 4096);
  if (parts == 1) {
    const int64_t xs = geo.outer.row_strides()[1];
    parallel_for(geo.m, std::max<int64_t>(1, kGrain / geo.r), [&](int64_t mb, int64_t me) {
      for_segments(geo.outer, mb, me, [&](const std::array<int64_t, 2>& off, int64_t n, int64_t m0) {
        for (int64_t j = 0; j < n; ++j) res[m0 + j] = arg_scan(is_max, px + off[1] + j * xs, 0, geo.r, s).index;
      });
    });
    return;
  }
  const std::vector<int64_t> bases = output_bases(geo);
  std::vector<ArgBest<C>> partial(size_t(geo.m * parts));
  parallel_for(geo.m * parts, 1, [&](int64_t tb, int64_t te) {
    for (int64_t t = tb; t < te; ++t) {
      const int64_t m = t / parts, p = t % parts;
      partial[size_t(t)] = arg_scan(is_max, px + bases[size_t(m)], geo.r * p / parts, geo.r * (p + 1) / parts, s);
    }
  });
  for (int64_t m = 0; m < geo.m; ++m) {
    ArgBest<C> best = partial[size_t(m * parts)];
    for (int64_t p = 1; p < parts; ++p) {
      const ArgBest<C>& cand = partial[size_t(m * parts + p)];
      if (arg_replaces(is_max, cand.value, best.value)) best = cand;
    }
    res[m] = best.index;
  }
}

}  // namespace tessera::kernels::cpu::detail

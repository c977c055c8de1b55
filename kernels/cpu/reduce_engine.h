// The loop engine behind the CPU reductions: folds g(x) over the reduced dims of x for every output
// with an associative op (sum, max, min), pairwise/cascaded so f32 sums of millions of values stay
// accurate. Two fast paths, both threaded: "rows" (each output reduces its own run of x, split
// across threads when outputs are few) and "columns" (the kept dims are contiguous in x, so whole
// row vectors are accumulated at once, e.g. summing (N, C) over N).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/parallel.h"
#include "core/strided_loop.h"
#include "kernels/cpu/loops.h"

namespace tessera::kernels::cpu::detail {

// kLanes: independent accumulators per leaf of fold_run, measured best for each op with AVX2 (two
// vectors hide the add latency; the blend-based max/min vectorises best with one).
template <typename Acc>
struct SumOp {
  static constexpr int64_t kLanes = 16;
  static Acc init() { return Acc(0); }
  static Acc op(Acc a, Acc b) { return a + b; }
};

// max and min keep the earlier value on ties and propagate NaN, like PyTorch's amax/amin. They
// start from -inf/+inf for floats (not the largest finite value), so a row of -inf reduces to -inf.
template <typename Acc>
struct MaxOp {
  static constexpr int64_t kLanes = 8;
  static Acc init() {
    if constexpr (std::numeric_limits<Acc>::has_infinity) return -std::numeric_limits<Acc>::infinity();
    return std::numeric_limits<Acc>::lowest();
  }
  static Acc op(Acc a, Acc b) { return pick((b > a) | (b != b), b, a); }
};

template <typename Acc>
struct MinOp {
  static constexpr int64_t kLanes = 8;
  static Acc init() {
    if constexpr (std::numeric_limits<Acc>::has_infinity) return std::numeric_limits<Acc>::infinity();
    return std::numeric_limits<Acc>::max();
  }
  static Acc op(Acc a, Acc b) { return pick((b < a) | (b != b), b, a); }
};

// x's element converted to the accumulator type (16-bit floats through f32).
template <typename Acc, typename T>
inline Acc load(T v) {
  return Acc(compute_t<T>(v));
}

// The reduction's index spaces: `outer` walks out's shape with {out strides, x strides} (the
// reduced dims have size 1 there and drop out), `inner` walks the reduced dims of x.
struct ReduceGeometry {
  ReduceGeometry(const Shape& out_shape, const Strides& out_strides, const Strides& x_strides,
                 const Shape& red_shape, const Strides& red_strides)
      : outer(out_shape, {out_strides, x_strides}),
        inner(red_shape, {red_strides}),
        m(shape_numel(out_shape)),
        r(shape_numel(red_shape)) {}
  StridedLoop<2> outer;
  StridedLoop<1> inner;
  int64_t m;  // number of outputs
  int64_t r;  // elements reduced into each output
};

// Fold of `width`-wide blocks in binary-counter order (pairwise summation over blocks): the
// rounding error grows with log(blocks), not blocks.
template <typename K, typename Acc>
class Cascade {
 public:
  explicit Cascade(int64_t width) : width_(width) {}
  void reset() { used_ = 0; }
  // Folds blk (width values) in; blk is clobbered.
  void add(Acc* blk) {
    for (int level = 0;; ++level) {
      if (size_t(level + 1) * width_ > levels_.size()) levels_.resize(size_t(level + 1) * width_);
      Acc* slot = levels_.data() + size_t(level) * width_;
      if (!((used_ >> level) & 1u)) {
        std::copy(blk, blk + width_, slot);
        used_ |= uint64_t(1) << level;
        return;
      }
      for (int64_t j = 0; j < width_; ++j) blk[j] = K::op(slot[j], blk[j]);
      used_ &= ~(uint64_t(1) << level);
    }
  }
  // The fold of everything added (K::init() when nothing was).
  void total(Acc* dst) const {
    std::fill(dst, dst + width_, K::init());
    for (int level = 63; level >= 0; --level) {
      if (!((used_ >> level) & 1u)) continue;
      const Acc* slot = levels_.data() + size_t(level) * width_;
      for (int64_t j = 0; j < width_; ++j) dst[j] = K::op(dst[j], slot[j]);
    }
  }

 private:
  int64_t width_;
  uint64_t used_ = 0;
  std::vector<Acc> levels_;
};

// Pairwise fold of g(p[i * s]) for i in [0, n). Leaves of up to 512 elements run K::kLanes
// independent lanes (vectorised when s == 1); splits stay multiples of kLanes, so only the last
// leaf has a scalar tail.
template <typename K, typename Acc, typename T, typename G>
Acc fold_run(const T* p, int64_t n, int64_t s, const G& g) {
  constexpr int64_t kLanes = K::kLanes, kLeaf = 512;
  if (n > kLeaf) {
    const int64_t h = ((n / 2) + kLanes - 1) / kLanes * kLanes;
    return K::op(fold_run<K, Acc>(p, h, s, g), fold_run<K, Acc>(p + h * s, n - h, s, g));
  }
  Acc a[kLanes];
  for (int k = 0; k < kLanes; ++k) a[k] = K::init();
  int64_t i = 0;
  if (s == 1) {
    for (; i + kLanes <= n; i += kLanes)
      for (int k = 0; k < kLanes; ++k) a[k] = K::op(a[k], g(load<Acc>(p[i + k])));
  } else {
    for (; i + kLanes <= n; i += kLanes)
      for (int k = 0; k < kLanes; ++k) a[k] = K::op(a[k], g(load<Acc>(p[(i + k) * s])));
  }
  Acc tail = K::init();  // a separate accumulator: indexing a[] by i would keep a[] out of registers
  for (; i < n; ++i) tail = K::op(tail, g(load<Acc>(p[i * s])));
  for (int w = kLanes / 2; w > 0; w /= 2)  // pairwise over the lanes
    for (int k = 0; k < w; ++k) a[k] = K::op(a[k], a[k + w]);
  return K::op(a[0], tail);
}

// x offset of each output's first reduced element, in outer (flat output) order.
inline std::vector<int64_t> output_bases(const ReduceGeometry& geo) {
  std::vector<int64_t> bases(size_t(geo.m));
  const int64_t xs = geo.outer.row_strides()[1];
  for_segments(geo.outer, 0, geo.m, [&](const std::array<int64_t, 2>& off, int64_t n, int64_t m0) {
    for (int64_t j = 0; j < n; ++j) bases[size_t(m0 + j)] = off[1] + j * xs;
  });
  return bases;
}

// Parts to split each of `units` work items into so that all threads get work.
inline int64_t split_parts(int64_t units, int64_t r, int64_t min_part) {
  const int64_t t = num_threads();
  if (units >= t) return 1;
  return std::max<int64_t>(1, std::min((t + units - 1) / units, r / min_part));
}

// Rows path: res[m] = fold over the reduced elements [b, e) of output m, for every m.
template <typename K, typename Acc, typename T, typename G>
void reduce_rows(const ReduceGeometry& geo, const T* px, const G& g, Acc* res) {
  const int64_t s = geo.inner.row_strides()[0];
  const bool one_run = geo.inner.num_rows() == 1;
  auto fold_range = [&](int64_t base, int64_t b, int64_t e, int64_t m, Cascade<K, Acc>& casc) {
    auto gm = [&](Acc v) { return g(v, m); };
    if (one_run) return fold_run<K, Acc>(px + base + b * s, e - b, s, gm);
    casc.reset();
    for_segments(geo.inner, b, e, [&](const std::array<int64_t, 1>& off, int64_t n, int64_t) {
      Acc v = fold_run<K, Acc>(px + base + off[0], n, s, gm);
      casc.add(&v);
    });
    Acc total;
    casc.total(&total);
    return total;
  };
  const int64_t parts = geo.m * geo.r < 2 * kGrain ? 1 : split_parts(geo.m, geo.r, 4096);
  if (parts == 1) {
    const int64_t xs = geo.outer.row_strides()[1];
    parallel_for(geo.m, std::max<int64_t>(1, kGrain / geo.r), [&](int64_t mb, int64_t me) {
      Cascade<K, Acc> casc(1);
      for_segments(geo.outer, mb, me, [&](const std::array<int64_t, 2>& off, int64_t n, int64_t m0) {
        for (int64_t j = 0; j < n; ++j) res[m0 + j] = fold_range(off[1] + j * xs, 0, geo.r, m0 + j, casc);
      });
    });
    return;
  }
  // Few outputs, long reductions: each output's range is cut into `parts` pieces folded in order.
  const std::vector<int64_t> bases = output_bases(geo);
  std::vector<Acc> partial(size_t(geo.m * parts));
  parallel_for(geo.m * parts, 1, [&](int64_t tb, int64_t te) {
    Cascade<K, Acc> casc(1);
    for (int64_t t = tb; t < te; ++t) {
      const int64_t m = t / parts, p = t % parts;
      partial[size_t(t)] = fold_range(bases[size_t(m)], geo.r * p / parts, geo.r * (p + 1) / parts, m, casc);
    }
  });
  for (int64_t m = 0; m < geo.m; ++m) {
    Acc v = partial[size_t(m * parts)];
    for (int64_t p = 1; p < parts; ++p) v = K::op(v, partial[size_t(m * parts + p)]);
    res[m] = v;
  }
}

// Columns path, for outer rows contiguous in x: every reduced element contributes a contiguous
// vector of row_size outputs. Blocks of 16 reduced elements are folded into a vector cascade.
template <typename K, typename Acc, typename T, typename G>
void reduce_columns(const ReduceGeometry& geo, const T* px, const G& g, Acc* res) {
  constexpr int64_t kBlock = 16;
  const int64_t lo = geo.outer.row_size();
  const int64_t rows_out = geo.m / lo;
  const int64_t t = num_threads();
  int64_t chunks = (lo + 4095) / 4096;  // keep a thread's accumulators in cache
  // Few output rows: threads first take pieces of the reduced rows (each reads one contiguous run
  // of x), and only when those are too few, also column chunks. Column chunks alone had each thread
  // read part of every row, a short run per 4 KiB page that the hardware prefetchers barely follow:
  // the bias gradient's sum of a (1024, 3072) tensor from memory ran at 24 GB/s that way.
  const int64_t parts =
      geo.m * geo.r < 2 * kGrain ? 1 : split_parts(rows_out * chunks, geo.r, 256);
  if (rows_out * chunks * parts < t) {
    chunks = std::max(chunks, std::min((t + rows_out * parts - 1) / (rows_out * parts),
                                       std::max<int64_t>(1, lo / 64)));
  }
  const int64_t units = rows_out * chunks;
  std::vector<Acc> partial(parts > 1 ? size_t(geo.m * parts) : 0);
  const int64_t s = geo.inner.row_strides()[0];
  const int64_t work = std::max<int64_t>(1, geo.m * geo.r / (units * parts));
  parallel_for(units * parts, std::max<int64_t>(1, kGrain / work), [&](int64_t tb, int64_t te) {
    std::vector<Acc> blk;
    for (int64_t task = tb; task < te; ++task) {
      const int64_t u = task / parts, p = task % parts;
      const int64_t orow = u / chunks, c = u % chunks;
      const int64_t c0 = lo * c / chunks, width = lo * (c + 1) / chunks - c0;
      const int64_t m0 = orow * lo + c0;
      int64_t xbase = 0;
      for_segments(geo.outer, m0, m0 + 1, [&](const std::array<int64_t, 2>& off, int64_t, int64_t) {
        xbase = off[1];
      });
      blk.assign(size_t(width), K::init());
      Cascade<K, Acc> casc(width);
      int64_t count = 0;
      Acc* bp = blk.data();
      for_segments(geo.inner, geo.r * p / parts, geo.r * (p + 1) / parts,
                   [&](const std::array<int64_t, 1>& off, int64_t n, int64_t) {
                     for (int64_t i = 0; i < n; ++i) {
                       const T* row = px + xbase + off[0] + i * s;
#pragma omp simd
                       for (int64_t j = 0; j < width; ++j) bp[j] = K::op(bp[j], g(load<Acc>(row[j]), m0 + j));
                       if (++count == kBlock) {
                         casc.add(bp);
                         std::fill(bp, bp + width, K::init());
                         count = 0;
                       }
                     }
                   });
      if (count > 0) casc.add(bp);
      Acc* dst = parts > 1 ? partial.data() + p * geo.m + m0 : res + m0;
      casc.total(dst);
    }
  });
  if (parts == 1) return;
  parallel_for(geo.m, kGrain, [&](int64_t mb, int64_t me) {
    for (int64_t m = mb; m < me; ++m) {
      Acc v = partial[size_t(m)];
      for (int64_t p = 1; p < parts; ++p) v = K::op(v, partial[size_t(p * geo.m + m)]);
      res[m] = v;
    }
  });
}

// res[m] = fold over output m's reduced elements of g(x, m); geo.r >= 1.
template <typename K, typename Acc, typename T, typename G>
void reduce_fold(const ReduceGeometry& geo, const T* px, const G& g, Acc* res) {
  if (geo.m == 0) return;
  const bool columns = geo.outer.row_size() > 1 && geo.outer.row_strides()[1] == 1;
  if (columns) return reduce_columns<K, Acc>(geo, px, g, res);
  reduce_rows<K, Acc>(geo, px, g, res);
}

}  // namespace tessera::kernels::cpu::detail

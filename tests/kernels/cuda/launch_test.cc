// The CUDA kernels' strided indexing, checked on the host (it needs no GPU): collapsed offset
// calculators give every operand's element offset for every linear index of transposed, sliced and
// broadcast views, and the 32-bit choice is made only when every offset fits.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "core/factory.h"
#include "kernels/cuda/launch.cuh"

using namespace tessera;
using namespace tessera::kernels::cuda;

namespace {

// Offset of row-major linear index i in a view of `shape` with `strides`, computed naively.
int64_t naive_offset(const Shape& shape, const Strides& strides, int64_t i) {
  int64_t off = 0;
  for (size_t d = shape.size(); d-- > 0;) {
    off += (i % shape[d]) * strides[d];
    i /= shape[d];
  }
  return off;
}

template <typename IndexT>
void check_calc(const Shape& shape, const std::array<Strides, 2>& strides) {
  const auto c = collapse<2>(shape, strides);
  const auto calc = make_calc<2, IndexT>(c, "test");
  const int64_t n = shape_numel(shape);
  for (int64_t i = 0; i < n; ++i) {
    const auto o = calc.get(IndexT(i));
    for (int k = 0; k < 2; ++k) {
      INFO("shape " << shape_str(shape) << " index " << i << " operand " << k);
      REQUIRE(int64_t(o.v[k]) == naive_offset(shape, strides[size_t(k)], i));
    }
  }
}

}  // namespace

TEST_CASE("offset calculators match naive strided indexing") {
  const Tensor base = empty({6, 5, 7});
  const Tensor views[] = {
      base,
      base.transpose(0, 2),
      base.slice(1, 1, 5, 2),
      base.narrow(2, 1, 5).transpose(0, 1),
      empty({5, 1, 7}).expand({5, 3, 7}),
      base.select(1, 3),
      empty({1, 1, 1}),
  };
  for (const Tensor& v : views) {
    const Tensor out = empty(v.shape());  // contiguous operand alongside the strided one
    check_calc<uint32_t>(v.shape(), {out.strides(), v.strides()});
    check_calc<int64_t>(v.shape(), {out.strides(), v.strides()});
    CHECK(fits_32bit(collapse<2>(v.shape(), {out.strides(), v.strides()})));
  }
}

TEST_CASE("collapsing merges contiguous dims and drops size-1 dims") {
  const Tensor t = empty({4, 1, 3, 5});
  const auto c = collapse<1>(t.shape(), {t.strides()});
  REQUIRE(c.sizes.size() == 1);
  CHECK(c.sizes[0] == 60);
  // (4, 1, 5, 3) with strides (15, 15, 1, 5): no neighbouring pair merges, the size-1 dim drops.
  const Tensor tt = t.transpose(2, 3);
  CHECK(collapse<1>(tt.shape(), {tt.strides()}).sizes.size() == 3);
  // (4, 15) after slicing the leading dim only: still one run.
  const Tensor head = t.narrow(0, 1, 2);
  CHECK(collapse<1>(head.shape(), {head.strides()}).sizes.size() == 1);
  CHECK(collapse<1>(Shape{}, {Strides{}}).sizes.empty());
}

TEST_CASE("32-bit indexing is chosen only when every offset fits") {
  // A (2, 2^31) view with a huge stride: 4 elements' worth of index space, offsets past 2^31.
  CHECK_FALSE(fits_32bit(collapse<1>(Shape{2, 2}, {Strides{int64_t(1) << 31, 1}})));
  CHECK(fits_32bit(collapse<1>(Shape{2, 2}, {Strides{int64_t(1) << 20, 1}})));
  CHECK_FALSE(fits_32bit(collapse<1>(Shape{int64_t(1) << 31}, {Strides{0}})));  // too many elements
  CHECK_FALSE(fits_32bit(collapse<1>(Shape{3, 2}, {Strides{-2, 1}})));           // negative stride
  // The 64-bit calculator handles the large-stride case.
  const auto calc = make_calc<1, int64_t>(collapse<1>(Shape{2, 2}, {Strides{int64_t(1) << 31, 1}}), "test");
  CHECK(calc.get(3).v[0] == (int64_t(1) << 31) + 1);
  // 13 dims that cannot merge (each stride 3x the next, sizes 2) exceed kMaxDims.
  Strides st(13);
  for (size_t d = 0; d < 13; ++d) st[d] = int64_t(std::pow(3.0, double(12 - d)));
  CHECK_THROWS_AS((make_calc<1, int64_t>(collapse<1>(Shape(13, 2), {st}), "test")), ValueError);
}

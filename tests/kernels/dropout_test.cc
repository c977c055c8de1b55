// Tests for the CPU dropout: the mask is exactly philox_uniform(seed, offset + i) >= p over the
// flat row-major index, kept values are scaled by 1/(1-p), the keep rate is 1-p, and the mask
// depends only on (seed, offset + i): not on threads, layout, dtype or how the tensor is split.
#include "kernels/cpu/dropout.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "core/factory.h"
#include "core/parallel.h"
#include "core/philox.h"
#include "kernels/dropout_math.h"

namespace {

using namespace tessera;
namespace kc = tessera::kernels::cpu;

std::vector<double> values(const Tensor& t) {
  Tensor c = t.to(DType::f32).contiguous();
  const float* p = c.data<float>();
  return std::vector<double>(p, p + c.numel());
}

Tensor randn_of(const Shape& shape, uint64_t seed, DType dtype = DType::f32) {
  Generator gen(seed);
  return randn(shape, {.dtype = dtype}, &gen);
}

// The documented definition, element by element, in the input's (row-major) value order.
void check_against_definition(const Tensor& x, const Tensor& out, double p, uint64_t seed,
                              uint64_t offset, double rtol) {
  const std::vector<double> vx = values(x), vo = values(out);
  const double scale = 1.0 / (1.0 - p);
  int64_t bad = 0;
  for (size_t i = 0; i < vx.size(); ++i) {
    const bool keep = double(philox_uniform(seed, offset + i)) >= p;
    const double want = keep ? vx[i] * scale : 0.0;
    if (!(std::abs(vo[i] - want) <= rtol * std::abs(want)) && bad++ < 5) {
      INFO("at " << i << ": got " << vo[i] << ", want " << want << " (keep " << keep << ")");
      CHECK(false);
    }
  }
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("dropout follows its definition and keeps 1-p of the elements", "[dropout]") {
  const int64_t n = 1 << 20;
  Tensor x = full({n}, 1.0);
  for (double p : {0.1, 0.5, 0.9}) {
    INFO("p " << p);
    Tensor out = empty({n});
    kc::dropout(x, p, 1234, 77, out);
    check_against_definition(x, out, p, 1234, 77, 1e-6);
    int64_t kept = 0;
    for (double v : values(out)) kept += v != 0.0;
    const double rate = double(kept) / double(n), sigma = std::sqrt(p * (1 - p) / double(n));
    CHECK(std::abs(rate - (1.0 - p)) < 5 * sigma);
  }
}

TEST_CASE("dropout keep test equals the uniform comparison at threshold edges", "[dropout]") {
  using kernels::dropout_threshold;
  CHECK(dropout_threshold(0.0) == 0u);
  CHECK(dropout_threshold(1.0) == 16777216u);
  CHECK(dropout_threshold(0.5) == 8388608u);
  CHECK(dropout_threshold(3.0 / 16777216.0) == 3u);
  CHECK(dropout_threshold(3.5 / 16777216.0) == 4u);
  // Many counters against p on and just off the 2^-24 grid.
  for (double p : {0.1, 0.25, 5.0 / 16777216.0, 0.7 + 1e-9, 1.0 - 1.0 / 16777216.0}) {
    const uint32_t t = dropout_threshold(p);
    int64_t mismatches = 0;
    for (uint64_t i = 0; i < 20000; ++i) {
      mismatches += kernels::dropout_keep(9, i, t) != (double(philox_uniform(9, i)) >= p);
    }
    CHECK(mismatches == 0);
  }
}

TEST_CASE("dropout p = 0 is the identity and p = 1 drops everything", "[dropout]") {
  Tensor x = randn_of({5, 7}, 1);
  Tensor out = empty({5, 7});
  kc::dropout(x, 0.0, 3, 0, out);
  CHECK(values(out) == values(x));
  kc::dropout(x, 1.0, 3, 0, out);
  for (double v : values(out)) CHECK(v == 0.0);
  CHECK_THROWS_AS(kc::dropout(x, 1.5, 3, 0, out), ValueError);
  CHECK_THROWS_AS(kc::dropout(x, 0.5, 3, 0, empty({5, 6})), ValueError);
}

TEST_CASE("dropout masks repeat for the same seed and offset and differ otherwise", "[dropout]") {
  Tensor x = full({64, 33}, 1.0);
  Tensor a = empty({64, 33}), b = empty({64, 33}), c = empty({64, 33}), d = empty({64, 33});
  kc::dropout(x, 0.5, 42, 1000, a);
  kc::dropout(x, 0.5, 42, 1000, b);
  kc::dropout(x, 0.5, 43, 1000, c);
  kc::dropout(x, 0.5, 42, 1001, d);
  CHECK(values(a) == values(b));
  CHECK(values(a) != values(c));
  CHECK(values(a) != values(d));
  // Shifting the offset by one shifts the mask by one element.
  std::vector<double> va = values(a), vd = values(d);
  CHECK(std::equal(vd.begin(), vd.end() - 1, va.begin() + 1));
}

TEST_CASE("dropout of a row shard with a shifted offset equals the shard of the whole",
          "[dropout]") {
  const int64_t C = 37;
  Tensor x = randn_of({12, C}, 5);
  Tensor whole = empty({12, C});
  kc::dropout(x, 0.3, 99, 500, whole);
  Tensor part = empty({4, C});
  kc::dropout(x.slice(0, 4, 8), 0.3, 99, 500 + 4 * C, part);
  CHECK(values(part) == values(whole.slice(0, 4, 8)));
}

TEST_CASE("dropout indexes strided tensors in row-major order and ignores threads and dtype",
          "[dropout]") {
  Tensor xt = randn_of({40, 30}, 6).transpose(0, 1);  // (30, 40), strided
  Tensor out = empty({40, 30}).transpose(0, 1);
  kc::dropout(xt, 0.25, 7, 11, out);
  check_against_definition(xt, out, 0.25, 7, 11, 1e-6);

  Tensor x = randn_of({257, 129}, 8);
  const int saved = num_threads();
  set_num_threads(1);
  Tensor one = empty({257, 129});
  kc::dropout(x, 0.4, 1, 2, one);
  set_num_threads(2);
  Tensor two = empty({257, 129});
  kc::dropout(x, 0.4, 1, 2, two);
  set_num_threads(saved);
  CHECK(values(one) == values(two));

  for (DType dt : {DType::f16, DType::bf16}) {
    Tensor xh = x.to(dt), oh = empty({257, 129}, {.dtype = dt});
    kc::dropout(xh, 0.4, 1, 2, oh);
    check_against_definition(xh, oh, 0.4, 1, 2, 1e-2);
    std::vector<double> vh = values(oh), v = values(one);
    int64_t mask_diff = 0;
    for (size_t i = 0; i < v.size(); ++i) mask_diff += (vh[i] == 0.0) != (v[i] == 0.0);
    CHECK(mask_diff == 0);
  }
}

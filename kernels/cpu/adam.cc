// CPU Adam / AdamW: every tensor of a call is cut into equal tiles and the threads share the tile
// list (one parallel region per call, however many tensors: a model's biases and norms cost no
// region each); each tile runs the update of adam_math.h over f32 arrays, in AVX-512 or AVX2
// copies of the same operations chosen at run time (GCC will not vectorise sqrtf while it may set
// errno, so they are written with intrinsics), the scalar adam_element for the tail. Every path
// performs the same correctly rounded operations per element, so the result does not depend on
// the ISA, the tiling or the thread count. 16-bit params and grads go through small f32 staging
// blocks.
#include "kernels/cpu/adam.h"

#include <immintrin.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "core/parallel.h"
#include "kernels/adam_math.h"
#include "kernels/cpu/cpu_features.h"

namespace tessera::kernels::cpu {
namespace {

constexpr int64_t kStage = 2048;  // staging block for 16-bit params / grads, in elements
// Work unit of the threads: a multiple of kStage and of both vector widths, small enough that a
// group of tensors splits evenly over the threads, large enough to amortise the dispatch.
constexpr int64_t kTile = 16 * kStage;
constexpr int64_t kParallelMin = 32768;  // fewer elements in a call: one thread

// Elements [begin, end) of entry `entry` of an adam_update_multi call.
struct AdamTile {
  size_t entry;
  int64_t begin, end;
};

// The vector part of the update on f32 arrays, adam_element's operations in its order (so the
// two ISAs and the scalar tail agree bit for bit); returns how many leading elements it updated.
int64_t adam_f32_vector(IsaAvx2, float* p, const float* g, float* m, float* v, int64_t n,
                        const AdamCoeffs& c) {
  int64_t i = 0;
#if defined(__AVX2__) && defined(__FMA__)
  const __m256 b1 = _mm256_set1_ps(c.beta1), b2 = _mm256_set1_ps(c.beta2);
  const __m256 omb1 = _mm256_set1_ps(c.one_minus_beta1), omb2 = _mm256_set1_ps(c.one_minus_beta2);
  const __m256 step = _mm256_set1_ps(c.step_size), ibc2 = _mm256_set1_ps(c.inv_sqrt_bc2);
  const __m256 eps = _mm256_set1_ps(c.eps), scale = _mm256_set1_ps(c.param_scale);
  const __m256 gdecay = _mm256_set1_ps(c.grad_decay);
  for (; i + 8 <= n; i += 8) {
    const __m256 pv = _mm256_loadu_ps(p + i);
    const __m256 gv = _mm256_fmadd_ps(gdecay, pv, _mm256_loadu_ps(g + i));
    const __m256 mv = _mm256_fmadd_ps(b1, _mm256_loadu_ps(m + i), _mm256_mul_ps(omb1, gv));
    const __m256 vv =
        _mm256_fmadd_ps(b2, _mm256_loadu_ps(v + i), _mm256_mul_ps(omb2, _mm256_mul_ps(gv, gv)));
    const __m256 denom = _mm256_fmadd_ps(_mm256_sqrt_ps(vv), ibc2, eps);
    const __m256 update = _mm256_div_ps(_mm256_mul_ps(step, mv), denom);
    _mm256_storeu_ps(p + i, _mm256_fmsub_ps(pv, scale, update));
    _mm256_storeu_ps(m + i, mv);
    _mm256_storeu_ps(v + i, vv);
  }
#endif
  return i;
}

TS_AVX512_TARGET int64_t adam_f32_vector(IsaAvx512, float* p, const float* g, float* m, float* v,
                                         int64_t n, const AdamCoeffs& c) {
  const __m512 b1 = _mm512_set1_ps(c.beta1), b2 = _mm512_set1_ps(c.beta2);
  const __m512 omb1 = _mm512_set1_ps(c.one_minus_beta1), omb2 = _mm512_set1_ps(c.one_minus_beta2);
  const __m512 step = _mm512_set1_ps(c.step_size), ibc2 = _mm512_set1_ps(c.inv_sqrt_bc2);
  const __m512 eps = _mm512_set1_ps(c.eps), scale = _mm512_set1_ps(c.param_scale);
  const __m512 gdecay = _mm512_set1_ps(c.grad_decay);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 pv = _mm512_loadu_ps(p + i);
    const __m512 gv = _mm512_fmadd_ps(gdecay, pv, _mm512_loadu_ps(g + i));
    const __m512 mv = _mm512_fmadd_ps(b1, _mm512_loadu_ps(m + i), _mm512_mul_ps(omb1, gv));
    const __m512 vv =
        _mm512_fmadd_ps(b2, _mm512_loadu_ps(v + i), _mm512_mul_ps(omb2, _mm512_mul_ps(gv, gv)));
    // maskz with a full mask is plain sqrt; it avoids GCC 12's uninitialised-passthrough warning.
    const __m512 denom = _mm512_fmadd_ps(_mm512_maskz_sqrt_ps(0xFFFF, vv), ibc2, eps);
    const __m512 update = _mm512_div_ps(_mm512_mul_ps(step, mv), denom);
    _mm512_storeu_ps(p + i, _mm512_fmsub_ps(pv, scale, update));
    _mm512_storeu_ps(m + i, mv);
    _mm512_storeu_ps(v + i, vv);
  }
  return i;
}

template <typename Isa>
void adam_f32(Isa isa, float* p, const float* g, float* m, float* v, int64_t n,
              const AdamCoeffs& c) {
  for (int64_t i = adam_f32_vector(isa, p, g, m, v, n, c); i < n; ++i) {
    adam_element(p[i], g[i], m[i], v[i], c);
  }
}

// Elements [begin, end) of one entry. f32 params and grads are updated where they lie; 16-bit ones
// go through the thread's staging blocks (p_stage, g_stage: kStage floats each).
template <typename Isa>
void adam_tile(Isa isa, const AdamTensors& a, int64_t begin, int64_t end, const AdamCoeffs& c,
               float* p_stage, float* g_stage) {
  float* m = a.exp_avg.data<float>();
  float* v = a.exp_avg_sq.data<float>();
  dispatch_floating(a.param.dtype(), "adam_update", [&]<typename P>() {
    dispatch_floating(a.grad.dtype(), "adam_update", [&]<typename G>() {
      P* p = static_cast<P*>(a.param.data_ptr());
      const G* g = static_cast<const G*>(a.grad.data_ptr());
      if constexpr (std::is_same_v<P, float> && std::is_same_v<G, float>) {
        adam_f32(isa, p + begin, g + begin, m + begin, v + begin, end - begin, c);
      } else {
        for (int64_t i = begin; i < end; i += kStage) {
          const int64_t len = std::min(kStage, end - i);
          for (int64_t k = 0; k < len; ++k) p_stage[k] = float(p[i + k]);
          for (int64_t k = 0; k < len; ++k) g_stage[k] = float(g[i + k]);
          adam_f32(isa, p_stage, g_stage, m + i, v + i, len, c);
          for (int64_t k = 0; k < len; ++k) p[i + k] = P(p_stage[k]);
        }
      }
    });
  });
}

void check_operand(const Tensor& t, int64_t n, const char* name, bool must_be_f32) {
  TS_CHECK(t.defined() && t.device().is_cpu() && t.is_contiguous() && t.numel() == n &&
               is_floating(t.dtype()) && (!must_be_f32 || t.dtype() == DType::f32),
           "adam_update", "expected ", name, " contiguous ", must_be_f32 ? "f32" : "floating",
           " on the cpu with ", n, " elements, got ", t.defined() ? t.describe() : "undefined");
}

void check_entry(const AdamTensors& a) {
  const int64_t n = a.param.defined() ? a.param.numel() : 0;
  check_operand(a.param, n, "param", false);
  check_operand(a.grad, n, "grad", false);
  check_operand(a.exp_avg, n, "exp_avg", true);
  check_operand(a.exp_avg_sq, n, "exp_avg_sq", true);
  TS_CHECK(a.grad.device() == a.param.device() && a.exp_avg.device() == a.param.device() &&
               a.exp_avg_sq.device() == a.param.device(),
           "adam_update", "expected param, grad and states in one memory, got param on ",
           a.param.device().str(), ":", a.param.device().index, ", grad on ",
           a.grad.device().str(), ":", a.grad.device().index);
}

}  // namespace

void adam_update(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                 const Tensor& exp_avg_sq, const AdamStep& step) {
  const AdamTensors one{param, grad, exp_avg, exp_avg_sq};
  cpu::adam_update_multi(std::span<const AdamTensors>(&one, 1), step);
}

void adam_update_multi(std::span<const AdamTensors> tensors, const AdamStep& s) {
  TS_CHECK(s.step >= 1, "adam_update", "expected step >= 1 (1-based), got ", s.step);
  std::vector<AdamTile> tiles;
  int64_t total = 0;
  for (size_t e = 0; e < tensors.size(); ++e) {
    check_entry(tensors[e]);
    const int64_t n = tensors[e].param.numel();
    for (int64_t b = 0; b < n; b += kTile) tiles.push_back({e, b, std::min(n, b + kTile)});
    total += n;
  }
  if (tiles.empty()) return;
  const AdamCoeffs c =
      adam_coeffs(s.lr, s.beta1, s.beta2, s.eps, s.weight_decay, s.decoupled, s.step);
  // Tiles are (nearly) equal, so equal counts per thread balance the work; below kParallelMin
  // elements a thread's start-up costs more than the update.
  const int64_t grain = total < kParallelMin ? int64_t(tiles.size()) : 1;
  parallel_for(int64_t(tiles.size()), grain, [&](int64_t first, int64_t last) {
    std::vector<float> p_stage(kStage), g_stage(kStage);
    with_isa([&](auto isa) {
      for (int64_t t = first; t < last; ++t) {
        const AdamTile& tile = tiles[size_t(t)];
        adam_tile(isa, tensors[tile.entry], tile.begin, tile.end, c, p_stage.data(),
                  g_stage.data());
      }
    });
  });
}

}  // namespace tessera::kernels::cpu

// Tests for the CPU Adam / AdamW update against a double-precision PyTorch-style loop over several
// steps, bit-equality of the vectorised path with the shared adam_element math, odd sizes (vector
// tails, threads), 16-bit params and grads, and operand checks; the multi-tensor tiled driver bit
// for bit against adam_element under each ISA the host has, 1 and 2 threads, Adam and AdamW, with
// and without weight decay, over the bias corrections of steps 1..6.
#include "kernels/cpu/adam.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <optional>
#include <vector>

#include "core/factory.h"
#include "core/parallel.h"
#include "kernels/adam_math.h"
#include "kernels/cpu/cpu_features.h"

namespace {

using namespace tessera;
namespace kc = tessera::kernels::cpu;
using tessera::kernels::AdamStep;

std::vector<double> values(const Tensor& t) {
  Tensor c = t.to(DType::f32).contiguous();
  const float* p = c.data<float>();
  return std::vector<double>(p, p + c.numel());
}

Tensor randn_of(const Shape& shape, uint64_t seed, DType dtype = DType::f32) {
  Generator gen(seed);
  return randn(shape, {.dtype = dtype}, &gen);
}

struct State {
  std::vector<double> p, m, v;
};

// torch.optim.Adam / AdamW's step, in double.
void ref_step(State& s, const std::vector<double>& g, const AdamStep& h) {
  const double bc1 = 1 - std::pow(double(h.beta1), double(h.step));
  const double bc2 = 1 - std::pow(double(h.beta2), double(h.step));
  for (size_t i = 0; i < s.p.size(); ++i) {
    double gi = g[i];
    if (h.decoupled) {
      s.p[i] *= 1 - double(h.lr) * double(h.weight_decay);
    } else {
      gi += double(h.weight_decay) * s.p[i];
    }
    s.m[i] = h.beta1 * s.m[i] + (1 - double(h.beta1)) * gi;
    s.v[i] = h.beta2 * s.v[i] + (1 - double(h.beta2)) * gi * gi;
    s.p[i] -= double(h.lr) / bc1 * s.m[i] / (std::sqrt(s.v[i]) / std::sqrt(bc2) + double(h.eps));
  }
}

// |got - want| <= atol + rtol |want|. Params start near 1, so their f32 rounding is absolute (~1e-7
// per step) even where the value has moved close to 0.
void expect_close(const std::vector<double>& got, const std::vector<double>& want, double atol,
                  double rtol) {
  REQUIRE(got.size() == want.size());
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::abs(got[i] - want[i]) <= atol + rtol * std::abs(want[i])) && bad++ < 5) {
      INFO("at " << i << ": got " << got[i] << ", want " << want[i]);
      CHECK(false);
    }
  }
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("adam_update follows Adam and AdamW over several steps", "[adam]") {
  for (int64_t n : {1, 7, 8, 9, 100003}) {
    for (bool decoupled : {true, false}) {
      INFO("n " << n << (decoupled ? " AdamW" : " Adam"));
      Tensor p = randn_of({n}, 1), m = zeros({n}), v = zeros({n});
      State ref{values(p), std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)};
      AdamStep h{.lr = 1e-2f,
                 .beta1 = 0.9f,
                 .beta2 = 0.95f,
                 .eps = 1e-8f,
                 .weight_decay = 0.1f,
                 .decoupled = decoupled};
      for (int64_t step = 1; step <= 5; ++step) {
        h.step = step;
        Tensor g = randn_of({n}, 100 + step);
        kc::adam_update(p, g, m, v, h);
        ref_step(ref, values(g), h);
      }
      expect_close(values(p), ref.p, 2e-6, 1e-5);
      expect_close(values(m), ref.m, 1e-7, 1e-5);
      expect_close(values(v), ref.v, 1e-9, 1e-5);
    }
  }
}

TEST_CASE("adam_update's vector path equals the shared per-element math", "[adam]") {
  const int64_t n = 1000;
  Tensor p = randn_of({n}, 2), g = randn_of({n}, 3), m = randn_of({n}, 4), v = randn_of({n}, 5);
  float* vp = v.data<float>();
  for (int64_t i = 0; i < n; ++i) vp[i] = std::abs(vp[i]);
  std::vector<float> sp(p.data<float>(), p.data<float>() + n),
      sm(m.data<float>(), m.data<float>() + n), sv(vp, vp + n);
  const std::vector<float> sg(g.data<float>(), g.data<float>() + n);
  const AdamStep h{.lr = 3e-4f, .weight_decay = 0.01f, .decoupled = true, .step = 17};
  const auto c =
      kernels::adam_coeffs(h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, h.decoupled, h.step);
  for (int64_t i = 0; i < n; ++i) kernels::adam_element(sp[i], sg[i], sm[i], sv[i], c);
  kc::adam_update(p, g, m, v, h);
  int64_t differ = 0;
  for (int64_t i = 0; i < n; ++i) {
    differ += p.data<float>()[i] != sp[i] || m.data<float>()[i] != sm[i] || vp[i] != sv[i];
  }
  CHECK(differ == 0);
}

TEST_CASE("adam_update with 16-bit params or grads", "[adam]") {
  const int64_t n = 5003;
  for (DType pt : {DType::f32, DType::bf16, DType::f16}) {
    for (DType gt : {DType::f32, DType::bf16}) {
      INFO("param " << dtype_name(pt) << " grad " << dtype_name(gt));
      Tensor p = randn_of({n}, 6, pt), g = randn_of({n}, 7, gt), m = zeros({n}), v = zeros({n});
      State ref{values(p), std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)};
      const AdamStep h{.lr = 1e-3f, .weight_decay = 0.1f};
      kc::adam_update(p, g, m, v, h);
      ref_step(ref, values(g), h);
      expect_close(values(m), ref.m, 1e-7, 1e-5);
      expect_close(values(v), ref.v, 1e-9, 1e-5);
      // A bf16 param moves by lr ~ 1e-3 per step, below its resolution near 1: compare with the
      // reference rounded to the param's dtype.
      Tensor want = from_vector(std::vector<float>(ref.p.begin(), ref.p.end()), {n}).to(pt);
      expect_close(values(p), values(want), 2e-6, pt == DType::f32 ? 1e-5 : 1e-2);
    }
  }
}

TEST_CASE("adam_update checks its operands", "[adam]") {
  Tensor p = zeros({4}), g = zeros({4}), m = zeros({4}), v = zeros({4});
  CHECK_THROWS_AS(kc::adam_update(p, zeros({5}), m, v, {}), ValueError);
  CHECK_THROWS_AS(kc::adam_update(p, g, zeros({4}, {.dtype = DType::bf16}), v, {}), ValueError);
  CHECK_THROWS_AS(
      kc::adam_update(zeros({2, 4}).transpose(0, 1), zeros({4, 2}), zeros({8}), zeros({8}), {}),
      ValueError);
  CHECK_THROWS_AS(kc::adam_update(p, g, m, v, {.step = 0}), ValueError);
  CHECK_THROWS_AS(kc::adam_update(p, zeros({4}, {.dtype = DType::i32}), m, v, {}), ValueError);
}

namespace {

// The scalar reference: adam_element over every element (16-bit params rounded through f32 as
// the kernel's staging does), one AdamStep per step.
void scalar_steps(std::vector<float>& p, const std::vector<float>& g, std::vector<float>& m,
                  std::vector<float>& v, AdamStep h, int64_t steps) {
  for (int64_t step = 1; step <= steps; ++step) {
    const auto c = kernels::adam_coeffs(h.lr, h.beta1, h.beta2, h.eps, h.weight_decay,
                                        h.decoupled, step);
    for (size_t i = 0; i < p.size(); ++i) kernels::adam_element(p[i], g[i], m[i], v[i], c);
  }
}

std::vector<float> floats_of(const Tensor& t) {
  const float* p = t.data<float>();
  return std::vector<float>(p, p + t.numel());
}

size_t count_differences(const std::vector<float>& a, const std::vector<float>& b) {
  size_t n = a.size() == b.size() ? 0 : std::max(a.size(), b.size());
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) n += a[i] != b[i];
  return n;
}

std::vector<kc::Isa> host_isas() {
  std::vector<kc::Isa> isas{kc::Isa::avx2};
  if (kc::cpu_supports_avx512()) isas.push_back(kc::Isa::avx512);
  return isas;
}

}  // namespace

TEST_CASE("adam_update_multi over tiles equals adam_element bit for bit", "[adam]") {
  // Lengths around the vector widths, the staging block (2048) and the tile (32768), so tiles,
  // vector bodies and scalar tails all meet entry boundaries.
  const std::vector<int64_t> lengths{1, 7, 17, 2049, 32767, 32768, 32769, 70001};
  for (kc::Isa isa : host_isas()) {
    kc::set_isa_override_for_testing(isa);
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      for (bool decoupled : {true, false}) {
        for (float wd : {0.0f, 0.1f}) {
          INFO(kc::isa_name(isa) << ", " << threads << " threads, "
                                 << (decoupled ? "AdamW" : "Adam") << ", weight_decay " << wd);
          const AdamStep h{.lr = 3e-3f, .beta1 = 0.8f, .beta2 = 0.99f, .eps = 1e-6f,
                           .weight_decay = wd, .decoupled = decoupled};
          std::vector<Tensor> p, g, m, v;
          for (size_t e = 0; e < lengths.size(); ++e) {
            p.push_back(randn_of({lengths[e]}, 40 + e));
            g.push_back(randn_of({lengths[e]}, 60 + e));
            m.push_back(zeros({lengths[e]}));
            v.push_back(zeros({lengths[e]}));
          }
          std::vector<std::vector<float>> sp, sm, sv;
          for (size_t e = 0; e < lengths.size(); ++e) {
            sp.push_back(floats_of(p[e]));
            sm.push_back(floats_of(m[e]));
            sv.push_back(floats_of(v[e]));
          }
          std::vector<kernels::AdamTensors> entries;
          for (size_t e = 0; e < lengths.size(); ++e) entries.push_back({p[e], g[e], m[e], v[e]});
          const int64_t steps = 6;  // bias corrections of steps 1..6
          for (int64_t step = 1; step <= steps; ++step) {
            AdamStep hs = h;
            hs.step = step;
            kc::adam_update_multi(entries, hs);
          }
          size_t differ = 0;
          for (size_t e = 0; e < lengths.size(); ++e) {
            scalar_steps(sp[e], floats_of(g[e]), sm[e], sv[e], h, steps);
            differ += count_differences(floats_of(p[e]), sp[e]) +
                      count_differences(floats_of(m[e]), sm[e]) +
                      count_differences(floats_of(v[e]), sv[e]);
          }
          CHECK(differ == 0);
        }
      }
    }
  }
  set_num_threads(2);
  kc::set_isa_override_for_testing(std::nullopt);
}

TEST_CASE("adam_update_multi with bf16 params equals the f32 update rounded each step", "[adam]") {
  // The bf16-param path stages through f32: each step is the f32 update of the bf16 value, its
  // result rounded to bf16 (round to nearest even), whatever the tiling.
  const std::vector<int64_t> lengths{3, 2048, 33001};
  for (kc::Isa isa : host_isas()) {
    kc::set_isa_override_for_testing(isa);
    INFO(kc::isa_name(isa));
    std::vector<Tensor> p, g, m, v;
    std::vector<kernels::AdamTensors> entries;
    for (size_t e = 0; e < lengths.size(); ++e) {
      p.push_back(randn_of({lengths[e]}, 80 + e, DType::bf16));
      g.push_back(randn_of({lengths[e]}, 90 + e, DType::bf16));
      m.push_back(zeros({lengths[e]}));
      v.push_back(zeros({lengths[e]}));
      entries.push_back({p[e], g[e], m[e], v[e]});
    }
    std::vector<std::vector<float>> sp, sg, sm, sv;
    for (size_t e = 0; e < lengths.size(); ++e) {
      sp.push_back(floats_of(p[e].to(DType::f32)));
      sg.push_back(floats_of(g[e].to(DType::f32)));
      sm.push_back(std::vector<float>(size_t(lengths[e]), 0.0f));
      sv.push_back(std::vector<float>(size_t(lengths[e]), 0.0f));
    }
    const AdamStep h{.lr = 1e-2f, .weight_decay = 0.1f};
    size_t differ = 0;
    for (int64_t step = 1; step <= 3; ++step) {
      AdamStep hs = h;
      hs.step = step;
      kc::adam_update_multi(entries, hs);
      for (size_t e = 0; e < lengths.size(); ++e) {
        const auto c = kernels::adam_coeffs(h.lr, h.beta1, h.beta2, h.eps, h.weight_decay,
                                            h.decoupled, step);
        for (size_t i = 0; i < sp[e].size(); ++i) {
          kernels::adam_element(sp[e][i], sg[e][i], sm[e][i], sv[e][i], c);
        }
        // Round to bf16 as the kernel's store does.
        sp[e] = floats_of(from_vector(sp[e], {lengths[e]}).to(DType::bf16).to(DType::f32));
      }
    }
    for (size_t e = 0; e < lengths.size(); ++e) {
      differ += count_differences(floats_of(p[e].to(DType::f32)), sp[e]) +
                count_differences(floats_of(m[e]), sm[e]) + count_differences(floats_of(v[e]), sv[e]);
    }
    CHECK(differ == 0);
  }
  kc::set_isa_override_for_testing(std::nullopt);
}

TEST_CASE("adam_update_multi checks every entry before updating any", "[adam]") {
  Tensor p = ones({40000}), g = ones({40000}), m = zeros({40000}), v = zeros({40000});
  std::vector<kernels::AdamTensors> entries{{p, g, m, v}, {zeros({4}), zeros({5}), zeros({4}), zeros({4})}};
  CHECK_THROWS_AS(kc::adam_update_multi(entries, {}), ValueError);
  CHECK(p.data<float>()[0] == 1.0f);  // the valid first entry was left alone
  // Operands in two CPU memories (the ZeRO offload host is a memory of its own) are refused.
  Tensor host_v = zeros({4}, {.device = Device{DeviceType::cpu, 1}});
  CHECK_THROWS_AS(kc::adam_update(zeros({4}), zeros({4}), zeros({4}), host_v, {}), ValueError);
}

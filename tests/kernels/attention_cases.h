// Attention test cases shared by the CUDA tests (tests/kernels/cuda) and the SIMT-emulated tests
// (tests/kernels/emulated): the case description, its inputs (dense, permuted or column-major
// views), the padding mask with a fully masked batch, and the comparison with the CPU kernel.
#pragma once

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "core/factory.h"
#include "kernels/kernels.h"
#include "tests/testing/compare.h"

namespace tessera::testing::attention {

struct Case {
  int64_t B, H, T, S, D;
  DType dtype;
  bool causal = false;
  bool mask = false;
  float dropout = 0.0f;
  bool strided = false;       // inputs as permuted (B, L, H, D) storage: rows still 16-byte aligned
  bool column_major = false;  // inputs as transposed (B, H, D, L) storage: unit stride across rows
  float scale = 0.0f;
  // Dropout draws the probabilities as heads [1, 1 + H) of H + 2 and the (T, S) block at rows 5
  // and columns 3 of a (T + 9, S + 4) attention (tensor and sequence parallelism).
  bool dropout_block = false;
};

inline std::string name_of(const Case& c) {
  return "B" + std::to_string(c.B) + " H" + std::to_string(c.H) + " T" + std::to_string(c.T) +
         " S" + std::to_string(c.S) + " D" + std::to_string(c.D) + " " + dtype_name(c.dtype) +
         (c.causal ? " causal" : "") + (c.mask ? " mask" : "") + (c.dropout > 0 ? " dropout" : "") +
         (c.strided ? " strided" : "") + (c.column_major ? " column-major" : "") +
         (c.dropout_block ? " dropout-block" : "");
}

// A (B, H, L, D) input on `device`; the values depend only on the seed, so copies on different
// devices hold the same numbers.
inline Tensor head_input(const Case& c, int64_t L, uint64_t seed, Device device = kCPU) {
  Generator gen(seed);
  if (c.column_major) {
    return randn({c.B, c.H, c.D, L}, {.dtype = c.dtype}, &gen).to(device).transpose(2, 3);
  }
  if (c.strided) {
    return randn({c.B, L, c.H, c.D}, {.dtype = c.dtype}, &gen).to(device).permute({0, 2, 1, 3});
  }
  return randn({c.B, c.H, L, c.D}, {.dtype = c.dtype}, &gen).to(device);
}

// Padding mask (B, S) on the CPU: batch 0 attends to every key, batch 1 to none (fully masked
// rows), the others to a pseudo-random subset.
inline Tensor padding_mask(const Case& c) {
  std::vector<float> m(size_t(c.B * c.S));
  for (int64_t b = 0; b < c.B; ++b) {
    for (int64_t s = 0; s < c.S; ++s) {
      const bool keep = b == 0 ? true : (b == 1 ? false : ((s * 7 + b * 3) % 5) != 0);
      m[size_t(b * c.S + s)] = keep ? 1.0f : 0.0f;
    }
  }
  return from_vector(m, {c.B, c.S}, {.dtype = DType::b8});
}

// Tolerance relative to the largest reference magnitude (at least the O(1) input scale): f32 agrees
// to rounding; 16-bit results differ by about one rounding of the output dtype, also on the tensor
// cores, which round P and dS to the input's 16 bits before multiplying (as flash attention does).
inline double relative_tolerance(DType t) {
  return t == DType::f32 ? 2e-5 : (t == DType::f16 ? 2e-3 : 1.6e-2);
}

inline void require_near(const Tensor& got, const Tensor& ref, DType dtype,
                         const std::string& what) {
  double scale = 1.0;  // exact zeros are common; the inputs are O(1)
  for (double x : to_doubles(ref)) {
    if (std::isfinite(x)) scale = std::max(scale, std::fabs(x));
  }
  INFO(what);
  const double tol = relative_tolerance(dtype);
  require_close(got, ref, tol, tol * scale);
}

inline kernels::AttentionOptions options_of(const Case& c) {
  kernels::AttentionOptions o;
  o.causal = c.causal;
  o.scale = c.scale;
  o.dropout_p = c.dropout;
  o.seed = 1234;
  o.offset = 77;
  if (c.dropout_block) {
    o.dropout_heads = c.H + 2;
    o.dropout_head_offset = 1;
    o.dropout_rows = c.T + 9;
    o.dropout_cols = c.S + 4;
    o.dropout_row_offset = 5;
    o.dropout_col_offset = 3;
  }
  return o;
}

// A case's inputs on one device (the same values on every device).
struct Inputs {
  Tensor q, k, v, grad_out, mask;
};

inline Inputs make_inputs(const Case& c, Device device = kCPU) {
  return {head_input(c, c.T, 1, device), head_input(c, c.S, 2, device),
          head_input(c, c.S, 3, device), head_input(c, c.T, 4, device),
          c.mask ? padding_mask(c).to(device) : Tensor()};
}

// The CPU kernel's results on CPU inputs: out and lse, and the gradients from that forward (the
// kernels under test get the same out and lse, so a backward comparison sees only the backward).
struct Results {
  Tensor out, lse, grad_q, grad_k, grad_v;
};

inline Results cpu_results(const Case& c, const Inputs& in) {
  const kernels::AttentionOptions o = options_of(c);
  const TensorOptions dt{.dtype = c.dtype};
  Results r{empty({c.B, c.H, c.T, c.D}, dt), empty({c.B, c.H, c.T}, {.dtype = DType::f32}),
            empty(in.q.shape(), dt), empty(in.k.shape(), dt), empty(in.v.shape(), dt)};
  kernels::attention_forward(in.q, in.k, in.v, in.mask, o, r.out, r.lse);
  kernels::attention_backward(in.q, in.k, in.v, r.out, r.lse, in.grad_out, in.mask, o, r.grad_q,
                              r.grad_k, r.grad_v);
  return r;
}

// Outputs for the kernels under test on `device`, filled with garbage: kernels must write (not
// accumulate into) every element.
inline Results garbage_results(const Case& c, Device device) {
  const TensorOptions dt{.dtype = c.dtype, .device = device};
  return {full({c.B, c.H, c.T, c.D}, 7.0, dt),
          full({c.B, c.H, c.T}, 7.0, {.dtype = DType::f32, .device = device}),
          full({c.B, c.H, c.T, c.D}, 3.0, dt), full({c.B, c.H, c.S, c.D}, 3.0, dt),
          full({c.B, c.H, c.S, c.D}, 3.0, dt)};
}

inline void require_matches(const Case& c, const Results& got, const Results& ref) {
  require_near(got.out, ref.out, c.dtype, "out");
  {
    INFO("lse");
    require_close(got.lse, ref.lse, 1e-5, 1e-5);
  }
  require_near(got.grad_q, ref.grad_q, c.dtype, "grad_q");
  require_near(got.grad_k, ref.grad_k, c.dtype, "grad_k");
  require_near(got.grad_v, ref.grad_v, c.dtype, "grad_v");
}

}  // namespace tessera::testing::attention

// Internal pieces of the CUDA attention shared by the host launchers and the kernels: the validated
// problem passed to every kernel by value, strided operand views, and the host-side checks.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "kernels/attention_dropout.h"
#include "kernels/kernels.h"

namespace tessera::kernels::cuda::attention_detail {

// Tile geometry of every attention kernel: 128 threads (4 warps), 32 queries by 32 keys, so one
// warp lane owns one key (or query) column of a score tile.
inline constexpr int kThreads = 128;
inline constexpr int kWarps = kThreads / 32;
inline constexpr int kBlockQ = 32;
inline constexpr int kBlockK = 32;

// A (B, H, L, D) tensor: device data and element strides (any layout).
struct Operand {
  void* data = nullptr;
  int64_t sb = 0, sh = 0, sl = 0, sd = 0;
  // Every row of every head starts on a 16-byte boundary with unit element stride, so rows can be
  // read 16 bytes at a time.
  bool rows16 = false;
};

// A (B, H, T) tensor such as lse.
struct RowOperand {
  void* data = nullptr;
  int64_t sb = 0, sh = 0, st = 0;
};

// The validated geometry and options of one attention call.
struct Problem {
  int64_t B = 0, H = 0, T = 0, S = 0;
  int D = 0;
  float scale = 1.0f;
  bool causal = false;
  int64_t shift = 0;  // causal: query t sees keys s <= t + shift (shift = S - T)
  float dropout_p = 0.0f;
  float keep_scale = 1.0f;  // 1 / (1 - p), in f32 as the CPU computes it
  uint64_t seed = 0;
  AttentionDropoutGrid dropout;   // where these probabilities sit in the layer's dropout draw
  const uint8_t* mask = nullptr;  // key padding mask (B, S) bool, true = attend; null when absent
  int64_t mask_sb = 0, mask_ss = 0;
};

// Checks q (B, H, T, D), k and v (B, H, S, D) on one CUDA device, D in {32, 64, 128}, and the mask
// (B, S), and resolves the options.
Problem make_problem(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                     const Tensor& key_padding_mask, const AttentionOptions& opts);

// make_problem on tensors of any one device: the SIMT-emulator tests run the kernels on CPU
// tensors.
Problem resolve_problem(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& key_padding_mask, const AttentionOptions& opts);

// Checks that t is defined, on q's device, with the given shape and dtype.
void check_tensor(const char* op, const char* name, const Tensor& t, const Tensor& q,
                  const Shape& shape, DType dtype);

Operand operand(const Tensor& t);         // t (B, H, L, D)
RowOperand row_operand(const Tensor& t);  // t (B, H, T)

}  // namespace tessera::kernels::cuda::attention_detail

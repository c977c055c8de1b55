// `bench tp`'s arithmetic, MPI-free: how P ranks lay out under each tensor-parallel scheme, the
// Colossal-AI documentation's bandwidth factor per scheme, and the bytes 1D (Megatron) tensor
// parallelism moves per rank for a transformer block and a GPT training step, counted the way the
// communicators count them (parallel/comm/comm_types.h: a ring all-reduce sends and receives
// floor(2 (P-1) / P x payload) per call).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/gpt/gpt_config.h"

namespace tessera::bench {

// One scheme on P ranks. The Colossal-AI documentation prices communication per scheme as a
// multiple of the activation size: 1D 2(P-1)/P, 2D 6(q-1)/q (P = q^2), 2.5D 3(q-1)(d+1)/(dq)
// (P = d q^2), 3D 6(q-1)/q^3 (P = q^3).
struct SchemeLayout {
  std::string mode;    // "1d", "2d", "2.5d", "3d"
  bool fits = false;   // P ranks can be laid out this way (q >= 2 for the grid schemes)
  int q = 0;           // grid side (1D: P)
  int depth = 1;       // 2.5D's d
  double factor = 0;   // the documentation's bandwidth factor at this layout; 0 when !fits
  std::string layout;  // "P=4", "q=2", "q=2 d=2", or why it does not fit: "2 is not q^2"
};

// "1d", "2d", "2.5d", "3d", in the order the tables list them.
const std::vector<std::string>& tp_modes();
// Throws tessera::ValueError for an unknown mode. 2.5D takes the largest q >= 2 with q^2 | P and
// d = P / q^2 (d = 1 is 2D).
SchemeLayout scheme_layout(const std::string& mode, int p);

// Bytes one rank sends (and receives) for one all-reduce of `payload` bytes on p ranks.
int64_t ring_all_reduce_bytes(int64_t payload, int p);

// What 1D moves per rank on one step of a section, all in all-reduces on the tensor group.
struct VolumePlan {
  int64_t activation_bytes = 0;  // A: one (B, T, C) activation, f32
  int64_t exchanges = 0;         // k: activation-sized all-reduces per step, forward + backward
  int64_t forward_calls = 0, backward_calls = 0;
  int64_t payload_bytes = 0;        // summed over calls (counted once per call)
  int64_t sent_bytes = 0;           // per rank, what the counters report (received alike)
  int64_t extra_payload_bytes = 0;  // payload that is not activation-sized
  int64_t extra_sent_bytes = 0;     // its share of sent_bytes
};

// One pre-LN block, forward + backward: 2 all-reduces of A forward (attention's and the MLP's
// row-parallel outputs), 2 backward (the column-parallel inputs' gradients).
VolumePlan plan_1d_block(int64_t batch, int64_t seq, int64_t d_model, int p);
// A GPT training step (loss, backward; the optimizer moves nothing): the vocab-parallel token
// embedding's all-reduce and 2 per block forward, 2 per block and the LM head's input gradient
// backward, each of A; plus the vocab-parallel cross-entropy's row statistics forward, B*T floats
// (max) and 2 B*T floats (sum-exp, target logit), the extra payload.
VolumePlan plan_1d_gpt_step(const gpt::GPTConfig& config, int64_t batch, int64_t seq, int p);

// The documentation's bytes per rank for `plan`'s k activation exchanges: factor x k x A
// (0 when the layout does not fit).
double doc_bytes(const SchemeLayout& layout, const VolumePlan& plan);

}  // namespace tessera::bench

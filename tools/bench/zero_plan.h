// `bench zero`'s arithmetic, MPI-free: the ZeRO paper's model-state bytes per rank for stages 0-3
// on N data ranks (as issue 12 states them), term by term, and data parallelism's ring volume.
//
// Terms, in bytes per parameter (Psi parameters):
//   f32 AdamW         parameters 4, gradients 4, Adam m and v 8, masters 0 (f32 parameters are
//                     their own masters): stage 0 16, stage 1 8 + 8/N, stage 2 4 + 12/N,
//                     stage 3 16/N.
//   bf16, f32 masters parameters 2, gradients 2, m and v 8, f32 masters 4 (the paper's K = 12):
//                     stage 0 16, stage 1 4 + 12/N, stage 2 2 + 14/N, stage 3 16/N.
// Stage 1 shards optimizer states and masters, stage 2 also gradients, stage 3 also parameters.
#pragma once

#include <cstdint>
#include <string>

namespace tessera::bench {

enum class ZeroPrecision { f32, bf16 };
const char* zero_precision_name(ZeroPrecision p);  // "f32", "bf16"

// Bytes per parameter of each model-state term on one rank.
struct StateTerms {
  double params = 0, grads = 0, states = 0, masters = 0;
  double total() const { return params + grads + states + masters; }
};

// The ZeRO formula's terms for `stage` (0-3) on `ranks` data ranks. Throws tessera::ValueError on a
// stage outside 0-3 or ranks < 1.
StateTerms zero_formula(ZeroPrecision precision, int stage, int ranks);
// The formula as the issue writes it: "16 Psi", "8 Psi + 8 Psi / N", "2 Psi + 14 Psi / N".
std::string zero_formula_text(ZeroPrecision precision, int stage);

// Bytes one rank sends per step under data parallelism's ring all-reduce of the gradients: the 2
// Psi volume, floor(2 (N-1) / N x Psi x itemsize) (parallel/comm/comm_types.h's count). 0 on one
// rank.
int64_t dp_ring_bytes(int64_t psi, int64_t itemsize, int ranks);

}  // namespace tessera::bench

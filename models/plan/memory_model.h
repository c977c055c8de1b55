// Bytes per rank under a layout, counted the way Tessera allocates them (core/allocator.h's
// counters): every parameter's local shard, gradients as autograd makes them (allocated in
// backward, released after the step), data parallelism's flat buckets, f32 masters and optimizer
// state (sharded under ZeRO), and the activations walked through forward and backward: what each
// layer saves, the micro-batches in flight per pipeline stage (from the schedule simulator), and
// the transient peaks of backward (the logits' gradient, an MLP's hidden gradient).
//
// The per-layer rules were read from the layers and checked against the allocator
// (tests/models/plan/memory_rules_test.cc): a serial pre-LN block saves, per token, 16 C + H + 4
// floats besides its input (LayerNorm outputs and statistics, the fused qkv, attention's output
// and log-sum-exp, its reshaped copy, the residual, the MLP's hidden twice); the MLP's backward
// peaks at one (tokens, hidden) gradient above what it frees later, attention's at a (tokens, 3 C)
// one; the LM head's at the (tokens, vocab) logits' gradient.
#pragma once

#include <cstdint>
#include <vector>

#include "models/plan/plan.h"
#include "models/plan/workload.h"

namespace tessera::plan {

// One rank's place in a layout.
struct RankPlace {
  int stage = 0;  // pipeline rank
  int64_t blocks = 0;
  bool first = true, last = true;  // holds the embeddings / the head
  // Micro-batches held at the peak, in whole stages' worth (interleaving: chunks / v): forwarded
  // but not yet backward.
  double in_flight = 1;
  int micro_batches = 1;  // per step on this rank
  // Zero bubble: micro-batches whose weight gradients are deferred, when in_flight peaks; and
  // the most of them, with the micro-batches in flight then (schedule_cache.h's HeldChunks).
  double deferred_then = 0;
  double deferred = 0, in_flight_then = 0;
  double in_flight_later = 1;  // in flight when a later backward starts (accumulating gradients)
};

// The peak of one rank holding `place` under `layout` (micro-batch and accumulation resolved).
// host_bytes gets offload's host share.
MemoryParts rank_memory(const Workload& w, const Layout& layout, const RankPlace& place,
                        int64_t* host_bytes = nullptr);

// This rank's parameter elements (its shards; a tied head on the last stage holds the table's).
int64_t local_parameters(const Workload& w, const Layout& layout, const RankPlace& place);

}  // namespace tessera::plan

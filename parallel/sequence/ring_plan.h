// Which (query, key) blocks a rank computes in ring attention, as pure arithmetic: at ring step i
// rank r holds the keys and values of rank (r - i) mod S, and attends each of its query segments
// to each of that rank's key segments. Under a causal mask a block fully above the diagonal is
// skipped, the diagonal block is causal and a block below it is full (segments of one layout are
// equal, aligned chunks, so no other case arises).
#pragma once

#include <cstdint>
#include <vector>

#include "parallel/sequence/layout.h"

namespace tessera::parallel::sequence {

// The rank whose keys and values rank `rank` holds at ring step `step`.
inline int ring_owner(int rank, int step, int size) { return ((rank - step) % size + size) % size; }

enum class BlockKind : uint8_t { full, causal };

// Queries q (this rank's segment) against keys k (a segment of the keys' owner, local to it).
struct AttentionBlock {
  Segment q;
  Segment k;
  BlockKind kind = BlockKind::full;
};

// The blocks where the queries of `rank` meet the keys of `owner`, in (query segment, key segment)
// order.
std::vector<AttentionBlock> ring_blocks(SequenceLayout layout, int64_t total, int size, int rank,
                                        int owner, bool causal);

// The (query, key) pairs a block's kernel scores per (batch, head): a full block lq * lk, a causal
// (square) block l (l + 1) / 2.
int64_t score_elements(const AttentionBlock& block);

// What rank `rank` scores over the whole ring, per (batch, head).
int64_t ring_score_elements(SequenceLayout layout, int64_t total, int size, int rank, bool causal);

}  // namespace tessera::parallel::sequence

// Ring attention's block plan (ring_plan.h).
#include "parallel/sequence/ring_plan.h"

#include "core/error.h"

namespace tessera::parallel::sequence {

std::vector<AttentionBlock> ring_blocks(SequenceLayout layout, int64_t total, int size, int rank,
                                        int owner, bool causal) {
  std::vector<AttentionBlock> blocks;
  const std::vector<Segment> keys = rank_segments(layout, total, size, owner);
  for (const Segment& q : rank_segments(layout, total, size, rank)) {
    for (const Segment& k : keys) {
      if (!causal || k.global_end() <= q.global) {
        blocks.push_back({q, k, BlockKind::full});
      } else if (k.global == q.global) {
        TS_ASSERT(k.length == q.length);
        blocks.push_back({q, k, BlockKind::causal});
      } else {
        TS_ASSERT(k.global >= q.global_end());  // above the diagonal: no query sees these keys
      }
    }
  }
  return blocks;
}

int64_t score_elements(const AttentionBlock& block) {
  const int64_t lq = block.q.length, lk = block.k.length;
  return block.kind == BlockKind::causal ? lq * (lq + 1) / 2 : lq * lk;
}

int64_t ring_score_elements(SequenceLayout layout, int64_t total, int size, int rank, bool causal) {
  int64_t n = 0;
  for (int step = 0; step < size; ++step) {
    for (const AttentionBlock& b :
         ring_blocks(layout, total, size, rank, ring_owner(rank, step, size), causal)) {
      n += score_elements(b);
    }
  }
  return n;
}

}  // namespace tessera::parallel::sequence

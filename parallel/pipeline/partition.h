// Cutting a model's ordered blocks into pipeline stages. Pure functions, tested without MPI.
// The embeddings ride on the first stage and the final norm + head + loss on the last; only the
// blocks are distributed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tessera::parallel::pipeline {

// How to split: "uniform" (blocks evenly: every stage floor(blocks / stages) or one more; the
// stages left with the fewer are, in this order, the last, the first, the second to last, the
// second, ..., since the ends also hold the head and the embeddings: 7 / 3 -> [2, 3, 2],
// 8 / 3 -> [3, 3, 2], 9 / 4 -> [2, 3, 2, 2]), "parameters" (contiguous stages minimising the
// largest stage's parameter count, the embeddings counted on the first stage and the head on the
// last; among equal largest the most even split, then uniform's preference, so equal blocks without
// extras split as "uniform" does), or an explicit list of block counts per stage.
enum class PartitionMethod : uint8_t { uniform, parameters, explicit_counts };

struct PartitionSpec {
  PartitionMethod method = PartitionMethod::uniform;
  std::vector<int64_t> counts;  // explicit_counts only: blocks per stage, summing to the blocks
  // {"partition": "uniform"} / "parameters" / [3, 4, 4, 3]; anything else throws ValueError.
  static PartitionSpec from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;
};

// Blocks [begin, end) of one stage.
struct BlockRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
  bool operator==(const BlockRange& o) const { return begin == o.begin && end == o.end; }
};

// Splits `blocks` blocks over `stages` stages (P * v under interleaving, in global stage order).
// block_params[i]: block i's parameter count, with first_extra / last_extra the embeddings' and the
// head's (used by "parameters" only). Throws ValueError naming the numbers: more stages than
// blocks (every stage needs at least one block), an explicit list of the wrong length or sum or
// with a count below 1.
std::vector<BlockRange> partition_blocks(const PartitionSpec& spec, int64_t blocks, int stages,
                                         const std::vector<int64_t>& block_params = {},
                                         int64_t first_extra = 0, int64_t last_extra = 0);

}  // namespace tessera::parallel::pipeline

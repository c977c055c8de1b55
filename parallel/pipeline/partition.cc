// Cutting the blocks into pipeline stages (see partition.h).
#include "parallel/pipeline/partition.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace tessera::parallel::pipeline {
namespace {

// Squares of stage costs (parameter counts up to ~1e12) overflow int64; compared exactly.
using Wide = __int128;

// How much stage i should take the heavier share when stages tie: the last stage (the head's
// matmul and the loss) least, then the first (the embeddings, and under 1F1B the most activations
// in flight), then inward from the ends. Distinct values: odd on the first half, even on the rest.
int64_t middle_weight(int i, int stages) {
  const int from_end = stages - 1 - i;
  return i < from_end ? 2 * i + 1 : 2 * from_end;
}

std::vector<BlockRange> ranges_of(const std::vector<int64_t>& sizes) {
  std::vector<BlockRange> out;
  int64_t begin = 0;
  for (int64_t n : sizes) {
    out.push_back({begin, begin + n});
    begin += n;
  }
  return out;
}

// floor(blocks / stages) each, the remainder one more to the stages of highest middle_weight.
std::vector<int64_t> uniform_sizes(int64_t blocks, int stages) {
  std::vector<int64_t> sizes(size_t(stages), blocks / stages);
  std::vector<int> order(static_cast<size_t>(stages));
  for (int i = 0; i < stages; ++i) order[size_t(i)] = i;
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return middle_weight(a, stages) > middle_weight(b, stages); });
  for (int64_t k = 0; k < blocks % stages; ++k) ++sizes[size_t(order[size_t(k)])];
  return sizes;
}

// Contiguous stages minimising the largest stage cost; among those the most even (least sum of
// squared costs), remaining ties by middle_weight. Two dynamic programmes over (stages used,
// blocks covered): the first finds the best largest cost, the second the most even split under it
// (minimising a max and a sum at once does not decompose; the second programme, given a bound,
// does).
std::vector<int64_t> balanced_sizes(const std::vector<int64_t>& params, int stages,
                                    int64_t first_extra, int64_t last_extra) {
  const int64_t n = int64_t(params.size());
  std::vector<int64_t> prefix(size_t(n + 1), 0);
  for (int64_t i = 0; i < n; ++i) prefix[size_t(i + 1)] = prefix[size_t(i)] + params[size_t(i)];
  const auto cost = [&](int s, int64_t b, int64_t e) {  // stage s holding blocks [b, e)
    return prefix[size_t(e)] - prefix[size_t(b)] + (s == 0 ? first_extra : 0) +
           (s == stages - 1 ? last_extra : 0);
  };
  // Stage s ends at e in [s + 1, n - (stages - 1 - s)], so every stage keeps a block.
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  std::vector<std::vector<int64_t>> worst(size_t(stages),
                                          std::vector<int64_t>(size_t(n + 1), kNone));
  for (int64_t e = 1; e <= n; ++e) worst[0][size_t(e)] = cost(0, 0, e);
  for (int s = 1; s < stages; ++s)
    for (int64_t e = s + 1; e <= n; ++e)
      for (int64_t b = s; b < e; ++b)
        if (worst[size_t(s - 1)][size_t(b)] != kNone)
          worst[size_t(s)][size_t(e)] =
              std::min(worst[size_t(s)][size_t(e)],
                       std::max(worst[size_t(s - 1)][size_t(b)], cost(s, b, e)));
  const int64_t bound = worst[size_t(stages - 1)][size_t(n)];

  struct Score {
    Wide squares = 0, tilt = 0;  // tilt: sum of cost * middle_weight, larger preferred
    bool better(const Score& o) const {
      return squares != o.squares ? squares < o.squares : tilt > o.tilt;
    }
  };
  std::vector<std::vector<Score>> best(size_t(stages), std::vector<Score>(size_t(n + 1)));
  std::vector<std::vector<int64_t>> cut(size_t(stages), std::vector<int64_t>(size_t(n + 1), -1));
  const auto stage_score = [&](int s, int64_t b, int64_t e) {
    const Wide c = cost(s, b, e);
    return Score{c * c, c * middle_weight(s, stages)};
  };
  for (int64_t e = 1; e <= n; ++e)
    if (cost(0, 0, e) <= bound) {
      best[0][size_t(e)] = stage_score(0, 0, e);
      cut[0][size_t(e)] = 0;
    }
  for (int s = 1; s < stages; ++s)
    for (int64_t e = s + 1; e <= n; ++e)
      for (int64_t b = s; b < e; ++b) {
        if (cut[size_t(s - 1)][size_t(b)] < 0 || cost(s, b, e) > bound) continue;
        const Score own = stage_score(s, b, e), &before = best[size_t(s - 1)][size_t(b)];
        const Score total{before.squares + own.squares, before.tilt + own.tilt};
        if (cut[size_t(s)][size_t(e)] < 0 || total.better(best[size_t(s)][size_t(e)])) {
          best[size_t(s)][size_t(e)] = total;
          cut[size_t(s)][size_t(e)] = b;
        }
      }
  std::vector<int64_t> sizes(static_cast<size_t>(stages));
  int64_t e = n;
  for (int s = stages - 1; s >= 0; --s) {
    const int64_t b = cut[size_t(s)][size_t(e)];
    sizes[size_t(s)] = e - b;
    e = b;
  }
  return sizes;
}

std::vector<BlockRange> explicit_ranges(const std::vector<int64_t>& counts, int64_t blocks,
                                        int stages) {
  TS_CHECK(int64_t(counts.size()) == stages, "partition", "expected ", stages,
           " block counts (one per pipeline stage), got ", counts.size());
  int64_t sum = 0;
  for (size_t s = 0; s < counts.size(); ++s) {
    TS_CHECK(counts[s] >= 1, "partition", "expected every stage to hold at least 1 block, got ",
             counts[s], " for stage ", s);
    sum += counts[s];
  }
  TS_CHECK(sum == blocks, "partition", "expected block counts summing to the model's ", blocks,
           " blocks, got ", sum);
  return ranges_of(counts);
}

std::vector<BlockRange> parameter_ranges(const std::vector<int64_t>& block_params, int64_t blocks,
                                         int stages, int64_t first_extra, int64_t last_extra) {
  TS_CHECK(int64_t(block_params.size()) == blocks, "partition", "expected ", blocks,
           " block parameter counts, got ", block_params.size());
  TS_CHECK(first_extra >= 0 && last_extra >= 0, "partition",
           "expected first and last stage extras >= 0, got ", first_extra, " and ", last_extra);
  for (size_t i = 0; i < block_params.size(); ++i)
    TS_CHECK(block_params[i] >= 0, "partition", "expected parameter counts >= 0, got ",
             block_params[i], " for block ", i);
  return ranges_of(balanced_sizes(block_params, stages, first_extra, last_extra));
}

}  // namespace

PartitionSpec PartitionSpec::from_json(const nlohmann::json& j) {
  if (j.is_object() && j.size() == 1 && j.contains("partition")) return from_json(j["partition"]);
  PartitionSpec spec;
  if (j == "uniform") return spec;
  if (j == "parameters") {
    spec.method = PartitionMethod::parameters;
    return spec;
  }
  TS_CHECK(j.is_array(), "partition",
           "expected the pipeline partition \"uniform\", \"parameters\" or a list of blocks per "
           "stage, got ",
           j.dump());
  spec.method = PartitionMethod::explicit_counts;
  for (const nlohmann::json& n : j) {
    TS_CHECK(n.is_number_integer(), "partition",
             "expected the pipeline partition's list to hold block counts (integers), got ",
             j.dump());
    spec.counts.push_back(n.get<int64_t>());
  }
  return spec;
}

nlohmann::json PartitionSpec::to_json() const {
  switch (method) {
    case PartitionMethod::uniform:
      return "uniform";
    case PartitionMethod::parameters:
      return "parameters";
    case PartitionMethod::explicit_counts:
      return counts;
  }
  TS_FAIL("partition", "unknown method ", int(method));  // not reached
}

std::vector<BlockRange> partition_blocks(const PartitionSpec& spec, int64_t blocks, int stages,
                                         const std::vector<int64_t>& block_params,
                                         int64_t first_extra, int64_t last_extra) {
  TS_CHECK(stages >= 1, "partition", "expected at least 1 pipeline stage, got ", stages);
  TS_CHECK(stages <= blocks, "partition", "expected at most ", blocks, " pipeline stages for ",
           blocks, " blocks, got ", stages, " (every stage needs a block)");
  switch (spec.method) {
    case PartitionMethod::uniform:
      return ranges_of(uniform_sizes(blocks, stages));
    case PartitionMethod::explicit_counts:
      return explicit_ranges(spec.counts, blocks, stages);
    case PartitionMethod::parameters:
      return parameter_ranges(block_params, blocks, stages, first_extra, last_extra);
  }
  TS_FAIL("partition", "unknown method ", int(spec.method));  // not reached
}

}  // namespace tessera::parallel::pipeline
